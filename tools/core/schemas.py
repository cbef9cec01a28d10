"""The record contract: JSON Schemas under schemas/, loaded once and compiled per kind.

jsonschema is authoritative but costs ~10 µs a record and ~0.1 s to import, so hot kinds also
have a hand-written precheck (`fast_check`) that accepts only records that are certainly valid;
anything it does not accept goes to jsonschema for the verdict and the message. Soundness
(fast-accept implies schema-valid) is a property test: tests/test_fastcheck.py.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from endstate import SCHEMA_DIR

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

KINDS = ("task", "episode", "graded_episode", "attempt", "difficulty", "metrics", "verdict")


def schema_path(kind: str):
    return SCHEMA_DIR / f"{kind}.schema.json"


@cache
def _registry():
    from referencing import Registry, Resource

    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = orjson.loads(path.read_bytes())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@cache
def validator(kind: str) -> Draft202012Validator:
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}; known: {', '.join(KINDS)}")
    from jsonschema import Draft202012Validator

    schema = orjson.loads(schema_path(kind).read_bytes())
    return Draft202012Validator(schema, registry=_registry())


def problem(kind: str, record: object) -> str | None:
    """None when `record` is a valid `kind` record, else one line saying what is wrong and where."""
    if fast_check(kind)(record):
        return None
    from jsonschema.exceptions import best_match

    v = validator(kind)
    if v.is_valid(record):
        return None
    error = best_match(v.iter_errors(record))
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{kind} record{where or ''}: {error.message} (schema: schemas/{kind}.schema.json)"


# --- fast prechecks: True only for records that are certainly valid ------------------------------
# Each mirrors its schema by hand and is deliberately stricter (an integer must be a Python int,
# not 3.0); whatever it rejects is judged by jsonschema. Keep them in step with the schemas.

_ATTEMPT_REQUIRED = itemgetter("task_id", "attempt", "status", "reward")
_NO_USAGE: dict = {}
_ATTEMPT_STATUS_REWARD = frozenset(
    {("ok", 0, int), ("ok", 1, int), ("system_error", None, type(None))})


def _attempt_ok(r: Any, required=_ATTEMPT_REQUIRED, status_reward=_ATTEMPT_STATUS_REWARD,
                type=type, str=str, int=int, float=float, dict=dict) -> bool:
    """schemas/attempt.schema.json, the common shapes only (globals bound as defaults: hot)."""
    try:
        task_id, attempt, status, reward = required(r)  # TypeError unless a mapping
        if (type(r) is not dict or type(task_id) is not str or not task_id
                or type(attempt) is not int or attempt < 0
                or (status, reward, type(reward)) not in status_reward):
            return False  # an unhashable status or reward raises TypeError above: also False
    except (KeyError, TypeError):
        return False
    if len(r) == 4:
        return True
    get = r.get
    if (type(get("domain", "")) is not str or type(get("model", "")) is not str
            or type(get("episode_id", "")) is not str):
        return False
    error = get("error")
    if error is not None and (type(error) is not dict or type(error.get("kind")) is not str
                              or type(error.get("message")) is not str):
        return False
    cost = get("cost_usd")
    if cost is not None and ((type(cost) is not float and type(cost) is not int) or cost < 0):
        return False
    usage = get("usage", _NO_USAGE)  # present means an object: null is not allowed
    if usage is not _NO_USAGE:
        if type(usage) is not dict:
            return False
        for role in usage.values():
            if type(role) is not dict:
                return False
            prompt, completion = role.get("prompt_tokens", 0), role.get("completion_tokens", 0)
            if type(prompt) is not int or type(completion) is not int or prompt < 0 or completion < 0:
                return False
    return True


def _never(record: Any) -> bool:
    return False


_FAST: dict[str, Callable[[Any], bool]] = {"attempt": _attempt_ok}


def fast_check(kind: str) -> Callable[[Any], bool]:
    """The precheck of `kind`: True means valid; False means "ask jsonschema"."""
    return _FAST.get(kind, _never)
