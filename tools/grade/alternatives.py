"""Other values an argument could take, for `grade validate`'s argument sensitivity: read from the
tool's JSON Schema and the gold value, deterministic, most telling first. Whether the tool accepts
one is the tool's to say (the caller replays it); these only have to be plausible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

ISO_DAY = re.compile(r"^(\d{4}-\d{2}-\d{2})(.*)$")  # a date, or a timestamp that starts with one
NUMBERED = re.compile(r"^(.*?)(\d+)$")  # an id such as W90071, a ZIP code at an address's end
ID = re.compile(r"^([A-Za-z]+)(\d+)$")  # W90071, K00042, TE902002
JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
              "array": (list,), "object": (dict,), "null": (type(None),)}


def alternatives(schema: dict[str, Any], value: Any, near: Iterable[Any] = (),
                 others: Iterable[Any] = ()) -> list[Any]:
    """Values other than `value` for an argument of JSON Schema `schema`, in this order: `near`
    (ids of the task's own rows shaped like `value`), small changes of the value's own kind
    (`variants`), `others` (what the argument is in other gold calls of the tool), and, for a
    string that is not one of an enum, the string reversed: garbled, so that a check on what the
    text contains ("the note gives the gate code") notices it too.

    Null is not among them: leaving out an optional argument is what the tool allows, and whether
    a task needs it given is for a check on the outcome to say."""
    found = [*near, *variants(schema, value), *(o for o in others if o is not None)]
    if isinstance(value, str) and not any("enum" in b and _fits(b, value) for b in _branches(schema)):
        found.append(value[::-1])
    distinct: list[Any] = []
    for candidate in found:
        if not same(candidate, value) and not any(same(candidate, d) for d in distinct):
            distinct.append(candidate)
    return distinct


def variants(schema: dict[str, Any], value: Any) -> list[Any]:
    """Small changes of `value` within the schema branch it belongs to: the other members of an
    enum, a boolean's negation, ±1 (and +10%) for numbers, the next and previous day of a date,
    the next and previous number at the end of a string (an id, a ZIP code), an array without its
    last or first item or with its last item changed, an object with one property changed."""
    branch = next((b for b in _branches(schema) if _fits(b, value)), None)
    if branch is None:
        return []
    if "enum" in branch:
        return [m for m in branch["enum"] if not same(m, value)]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        steps = [value + 1, value - 1]
        return steps if branch.get("type") == "integer" else [*steps, round(value * 1.1, 2)]
    if isinstance(value, str):
        return _string_variants(value)
    if isinstance(value, list):
        return _list_variants(branch, value)
    if isinstance(value, dict):
        return _object_variants(branch, value)
    return []


def shaped_like(value: Any, values: Iterable[Any], most: int) -> list[str]:
    """The first `most` distinct strings among `values` that are ids of the id `value`'s shape
    (the same letters, as many digits after them)."""
    m = ID.match(value) if isinstance(value, str) else None
    if not m:
        return []
    shape, found = re.compile(rf"^{m[1]}\d{{{len(m[2])}}}$"), []
    for v in values:
        if isinstance(v, str) and v != value and v not in found and shape.match(v):
            found.append(v)
            if len(found) == most:
                break
    return found


def _string_variants(value: str) -> list[str]:
    if m := ISO_DAY.match(value):
        try:
            day = date.fromisoformat(m[1])
        except ValueError:
            return []
        return [(day + timedelta(days=d)).isoformat() + m[2] for d in (1, -1)]
    if m := NUMBERED.match(value):
        prefix, digits = m[1], m[2]
        numbers = [int(digits) + 1] + ([int(digits) - 1] if int(digits) > 0 else [])
        return [f"{prefix}{n:0{len(digits)}d}" for n in numbers]
    return []


def _list_variants(schema: dict[str, Any], value: list[Any]) -> list[list[Any]]:
    if not value:
        return []
    found = [value[:-1]] + ([value[1:]] if len(value) > 1 else [])
    changed = variants(schema.get("items", {}), value[-1])
    if changed:
        found.append([*value[:-1], changed[0]])
    return found


def _object_variants(schema: dict[str, Any], value: dict[str, Any]) -> list[dict[str, Any]]:
    properties = schema.get("properties", {})
    found = []
    for name in (n for n in properties if n in value):
        changed = variants(properties[name], value[name])
        if changed:
            found.append({**value, name: changed[0]})
    return found


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return schema.get("anyOf") or schema.get("oneOf") or [schema]


def _fits(branch: dict[str, Any], value: Any) -> bool:
    """Whether `value` is of the branch's type (and in its enum, if it has one)."""
    if "enum" in branch and not any(same(m, value) for m in branch["enum"]):
        return False
    kinds = branch.get("type")
    if kinds is None:
        return "enum" in branch
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(value, bool):
        return "boolean" in kinds
    return any(isinstance(value, JSON_TYPES.get(k, ())) for k in kinds)


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are the same number, True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
