"""The record contract: JSON Schemas under schemas/, loaded once and compiled per kind.

jsonschema is authoritative but costs ~10 µs a record and ~0.1 s to import, so hot kinds also
have a msgspec Struct (records.structs, `record_struct`) that decodes and validates a raw line in
C and accepts only records that are certainly valid; anything it rejects goes to jsonschema for
the verdict and the message. Soundness (Struct accepts implies schema-valid) is a property test:
tests/test_fastcheck.py. Tasks, read again and again, are remembered instead once jsonschema has
found a line valid (records.verdicts).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from endstate import SCHEMA_DIR
from endstate.core.records import verdicts
from endstate.core.records.structs import Attempt, Episode, GradedEpisode

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

RECORD_KINDS = ("task", "episode", "graded_episode", "attempt", "difficulty", "metrics", "verdict",
                "audit")


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
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown record kind {kind!r}; known: {', '.join(RECORD_KINDS)}")
    from jsonschema import Draft202012Validator

    schema = orjson.loads(schema_path(kind).read_bytes())
    return Draft202012Validator(schema, registry=_registry())


# A record of the pipeline's wrong stage, by what was expected and what came: the step between.
WRONG_STAGE = {
    ("attempt", "episode"): "an episode (rollout's output, not graded yet): pipe the episodes "
                            "through `grade` for attempt records (`grade episodes.jsonl | evalstats`)",
    ("episode", "task"): "a task: run the tasks with `rollout` for episodes to grade",
    ("graded_episode", "episode"): "an episode (rollout's output, not graded yet): pipe the "
                                   "episodes through `grade` first (`grade episodes.jsonl | ...`)",
    ("task", "episode"): "an episode: this command reads tasks (a task file, or `grade tasks --full`)",
    ("task", "attempt"): "an attempt: this command reads tasks (a task file, `grade tasks --full`, "
                         "or `bucket --tasks FILE` to turn attempts into a pool)",
}


STAGES = {"task": "a task", "episode": "an episode (rollout's output)",
          "graded_episode": "a graded episode (grade's output, or probe --episodes)",
          "attempt": "an attempt (probe's output)", "difficulty": "a difficulty record (bucket's)",
          "verdict": "a verdict (grade validate's)", "audit": "an audit record (grade audit's)"}


def stage_of(record: dict) -> str | None:
    """Which record of the pipeline `record` is, by the fields that tell them apart (an attempt's
    schema admits a graded episode, which carries every attempt field): a key of STAGES, or None
    when it has none of their telling fields."""
    if "messages" in record or "changes" in record:
        return "graded_episode" if "grader" in record or "checks" in record else "episode"
    if "user" in record and "checks" in record:
        return "task"
    if "mass" in record or "band" in record:
        return "difficulty"
    if "sound" in record:
        return "verdict"
    if "rows" in record and "kinds" in record:
        return "audit"
    return "attempt" if "reward" in record else None


def problem(kind: str, record: object) -> str | None:
    """None when `record` is a valid `kind` record, else one line saying what is wrong and where
    (and, for a valid record of the pipeline's wrong stage, the step between)."""
    from jsonschema.exceptions import best_match

    v = validator(kind)
    if v.is_valid(record):
        return None
    error = best_match(v.iter_errors(record))
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    said = f"{kind} record{where or ''}: {error.message} (schema: schemas/{kind}.schema.json)"
    # a record of the wanted kind with one bad value (a reward of 7) may still pass an earlier
    # stage's schema: it is that stage only if its telling fields say so too
    came_as = stage_of(record) if isinstance(record, dict) else None
    stage = next((why for (wanted, came), why in WRONG_STAGE.items()
                  if wanted == kind and came == came_as and validator(came).is_valid(record)), None)
    return f"{said}; the record is {stage}" if stage else said


# --- typed fast path: C-level decoding into the record's Struct (records.structs) ------------------
# msgspec decodes and validates a line in one pass, faster than orjson builds the dict; whatever a
# Struct rejects is judged by jsonschema. episode and graded_episode: what every writer checks
# before it writes (records.jsonl.checked_line), in ~30 µs instead of jsonschema's ~600 µs.

_STRUCTS: dict[str, type[msgspec.Struct]] = {
    "attempt": Attempt, "episode": Episode, "graded_episode": GradedEpisode}


@cache
def record_struct(kind: str, extra: tuple[str, ...] = ()) -> type[msgspec.Struct] | None:
    """The Struct of `kind` (None if it has none), extended with any top-level field named in
    `extra` that it lacks (any JSON value, None when absent), so that e.g. `evalstats --by team`
    can group on a field the schema does not name. `attribute(struct, field)` is its name."""
    base = _STRUCTS.get(kind)
    if base is None or not extra:
        return base
    known = {f.encode_name for f in msgspec.structs.fields(base)}
    added = [f for f in dict.fromkeys(extra) if f not in known]
    if not added:
        return base
    names = {f"field_{i}": f for i, f in enumerate(added)}  # JSON keys need not be identifiers
    return msgspec.defstruct(f"{base.__name__}With{len(added)}", [(n, Any, None) for n in names],
                             bases=(base,), rename=names, gc=False)


def attribute(struct: type[msgspec.Struct], field: str) -> str:
    """The attribute of `struct` that holds top-level JSON field `field`."""
    for f in msgspec.structs.fields(struct):
        if f.encode_name == field:
            return f.name
    raise KeyError(f"{struct.__name__} has no field {field!r}; build it with record_struct(kind, extra)")


@cache
def struct_decoder(struct: type[msgspec.Struct]) -> Callable[[bytes], msgspec.Struct]:
    """Raw JSON bytes -> `struct`; raises msgspec.DecodeError (ValidationError) otherwise."""
    return msgspec.json.Decoder(struct).decode


def as_struct(record: dict[str, Any], struct: type[msgspec.Struct]) -> msgspec.Struct:
    """A schema-valid record the Struct rejected (integers written as 3.0) as that Struct."""
    return msgspec.convert(_integral_floats_as_ints(record), struct)


def _integral_floats_as_ints(value: Any) -> Any:
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is dict:
        return {k: _integral_floats_as_ints(v) for k, v in value.items()}
    if type(value) is list:
        return [_integral_floats_as_ints(v) for v in value]
    return value


def _never(raw: bytes) -> bool:
    return False


def judged_valid(kind: str, raw: bytes) -> None:
    """jsonschema found the line `raw` a valid `kind` record: remembered where kinds are
    (records.verdicts), so the same bytes skip it next time."""
    if kind in verdicts.KINDS:
        verdicts.of(kind).add(raw)


@cache
def fast_check(kind: str) -> Callable[[bytes], bool]:
    """The precheck of `kind` on a raw line: True means valid; False means "ask jsonschema"."""
    if kind in verdicts.KINDS:
        return verdicts.of(kind).known
    struct = _STRUCTS.get(kind)
    if struct is None:
        return _never
    decode, rejected = struct_decoder(struct), msgspec.DecodeError

    def accepts(raw: bytes) -> bool:
        try:
            decode(raw)
        except rejected:
            return False
        return True

    return accepts
