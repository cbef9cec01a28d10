"""The path of domains before endstate.core.env.domain, kept for one release."""

from endstate.core.deprecation import moved
from endstate.core.env.domain import *

moved(__name__, "from endstate.api import load_domains, Domains, Domain")
