"""The path of domain tools before endstate.core.env.tools, kept for one release: a domain's
tools.py and seed.py import from endstate.api."""

from endstate.core.deprecation import moved
from endstate.core.env.tools import *

moved(__name__, "from endstate.api import Db, ToolError, tool (and insert_rows, customer_finder, "
      "positive_cents, ...: every domain helper is there)")
