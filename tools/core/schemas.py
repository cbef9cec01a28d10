"""The record contract: JSON Schemas under schemas/, loaded once and compiled per kind."""

from __future__ import annotations

from functools import cache

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from endstate import SCHEMA_DIR

KINDS = ("task", "episode", "graded_episode", "attempt", "difficulty", "metrics", "verdict")


def schema_path(kind: str):
    return SCHEMA_DIR / f"{kind}.schema.json"


@cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = orjson.loads(path.read_bytes())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@cache
def validator(kind: str) -> Draft202012Validator:
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}; known: {', '.join(KINDS)}")
    schema = orjson.loads(schema_path(kind).read_bytes())
    return Draft202012Validator(schema, registry=_registry())


def problem(kind: str, record: object) -> str | None:
    """None when `record` is a valid `kind` record, else one line saying what is wrong and where."""
    v = validator(kind)
    if v.is_valid(record):
        return None
    error = best_match(v.iter_errors(record))
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{kind} record{where or ''}: {error.message} (schema: schemas/{kind}.schema.json)"
