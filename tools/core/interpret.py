"""The path of the interpreter before endstate.core.agent.interpret, kept for one release."""

from endstate.core.agent.interpret import *
from endstate.core.deprecation import moved

moved(__name__, "from endstate.api import render_signature (the rest of the interpreter is "
      "internal: endstate.core.agent.interpret)")
