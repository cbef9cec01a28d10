"""The path of nested documents before endstate.core.env.nested, kept for one release: a
domain's seed.py imports Mapping and insert_document from endstate.api."""

from endstate.core.deprecation import moved
from endstate.core.env.nested import *

moved(__name__, "from endstate.api import Mapping, insert_document, rebuild_document")
