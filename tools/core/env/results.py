"""How a tool's return value reaches the agent: the text of its tool message, by format name. A
domain picks one with `RESULTS = "NAME"` in its tools.py (default `json`); a module adds one with
`@RESULT_FORMATS.register(NAME)`. An error observation is the same in every format:
`{"error": "..."}`, which `grade validate` and `grade show` recognise."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import date
from typing import Any

import orjson

from endstate.core.registry import Registry

DEFAULT_FORMAT = "json"
RESULT_FORMATS: Registry[Callable[[Any], str]] = Registry("tool result format")


@RESULT_FORMATS.register("json")
def as_json(value: Any) -> str:
    """Compact JSON, UTF-8, a string quoted: every built-in domain's results."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


@RESULT_FORMATS.register("tau2")
def as_tau2(value: Any) -> str:
    """What tau2-bench's environment shows the agent for this value (its Environment.to_json_str):
    a string as it is (an id, a sentence, or JSON text the tool wrote itself); anything else as
    Python's json writes it (`", "` and `": "` between items, non-ASCII as \\u escapes, what it
    cannot encode as str()), where a number or boolean outside an object is written as a string
    ("4.0", "True") as tau2 does, and an object (a dict, or a dataclass) as tau2 writes its data
    models (pydantic's model_dump): its values as they are. tau2 tools return a model where a port
    returns a dict (DOCS.load); the rare tau2 tool that returns a plain dict of numbers shows them
    as strings, so its port returns strings."""
    if isinstance(value, str):
        return value
    return json.dumps(_tau2_plain(value), default=str)


def _tau2_plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, dict)):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_tau2_plain(v) for v in value]
    if isinstance(value, date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value
