"""The attempt fast path (the msgspec Struct in tools/core/schemas.py) and the forked fold
(tools/core/records.py)."""

from __future__ import annotations

import json

import msgspec
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from endstate.core.errors import InputError
from endstate.core.records import jsonl as records
from endstate.core.records import schemas
from endstate.core.records.jsonl import Loc, SkipLog, fold_jsonl, read_jsonl
from endstate.core.records.structs import Attempt

VALID = {"task_id": "t1", "domain": "retail", "attempt": 3, "reward": 1, "status": "ok",
         "model": "m", "usage": {"agent": {"prompt_tokens": 5, "completion_tokens": 2}},
         "cost_usd": 0.5, "episode_id": "e"}

# Values that are right for some field and wrong for most: near-valid records mix them in.
junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, -0.5, 2.5]),
                 st.sampled_from(["", "ok", "system_error", "x"]), st.just([]), st.just({}),
                 st.just({"prompt_tokens": -1}), st.just({"a": {"prompt_tokens": 1.0}}),
                 st.just({"a": {"completion_tokens": True}}), st.just({"a": []}))


def text(min_size=0):  # JSON text: no lone surrogates
    return st.text(st.characters(blacklist_categories=("Cs",)), min_size=min_size, max_size=3)


@st.composite
def near_valid(draw):
    status = draw(st.sampled_from(["ok", "system_error"]))
    record = {"task_id": draw(text(min_size=1)), "attempt": draw(st.integers(0, 9)),
              "status": status, "reward": draw(st.sampled_from([0, 1])) if status == "ok" else None}
    for key in ("domain", "model", "episode_id"):
        if draw(st.booleans()):
            record[key] = draw(text())
    if draw(st.booleans()):
        record["cost_usd"] = draw(st.one_of(st.none(), st.floats(0, 10), st.integers(0, 10)))
    if draw(st.booleans()):
        record["usage"] = draw(st.dictionaries(
            st.sampled_from(["agent", "user"]),
            st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "other"]),
                            st.integers(0, 99), max_size=3), max_size=2))
    for _ in range(draw(st.integers(0, 2))):  # break it, or not
        key = draw(st.sampled_from([*VALID, "extra"]))
        if draw(st.booleans()):
            record.pop(key, None)
        else:
            record[key] = draw(junk)
    return record


@settings(max_examples=1000, deadline=None)
@given(near_valid())
@example({"task_id": "0", "attempt": 0, "status": "ok", "reward": 0, "usage": None})  # found by it
@example({**VALID, "cost_usd": None, "domain": None})
def test_fast_accept_implies_schema_valid(record):
    raw = orjson.dumps(record)
    valid = schemas.validator("attempt").is_valid(record)
    if schemas.fast_check("attempt")(raw):
        assert valid, record
    if valid:  # and the reader hands every valid record over as the Struct, values intact
        (got,) = read_struct(raw)
        assert _view(msgspec.to_builtins(got)) == _view({**msgspec.to_builtins(got), **record})


def _view(record):
    """What the tallies read, integers written as 3.0 read as 3; absent token counts are 0."""
    usage = {role: (u.get("prompt_tokens", 0), u.get("completion_tokens", 0))
             for role, u in (record.get("usage") or {}).items()}
    return orjson.loads(orjson.dumps({**{k: record[k] for k in Attempt.__struct_fields__},
                                      "usage": schemas._integral_floats_as_ints(usage)}))


def read_struct(*lines, struct=Attempt):
    return list(records._records("x.jsonl", lines, 1, "attempt", None, False, struct))


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.integers(), text(), st.lists(st.integers())))
def test_fast_check_rejects_non_objects(value):
    assert not schemas.fast_check("attempt")(json.dumps(value).encode())


def test_fast_check_accepts_the_common_shapes():
    fast = schemas.fast_check("attempt")
    assert fast(orjson.dumps(VALID))
    assert fast(b'{"task_id": "t", "attempt": 0, "status": "system_error", "reward": null}\n')
    assert fast((schemas.SCHEMA_DIR / "examples/attempt.json").read_bytes())
    # stricter than the schema: these go to jsonschema, which accepts them
    for record in ({**VALID, "attempt": 3.0}, {**VALID, "usage": {"agent": {"prompt_tokens": 1.0}}}):
        assert not fast(orjson.dumps(record)) and schemas.problem("attempt", record) is None
        (got,) = read_struct(orjson.dumps(record))
        assert got.attempt == 3 and type(got.attempt) is int
    for bad, message in [({**VALID, "domain": None}, "x.jsonl:1: attempt record.domain: None is "),
                         ({**VALID, "reward": None}, "x.jsonl:1: attempt record.reward: None is not")]:
        with pytest.raises(InputError, match=message):
            read_struct(orjson.dumps(bad))


def test_struct_with_extra_fields_for_grouping():
    struct = schemas.record_struct("attempt", ("domain", "team-a"))
    assert schemas.record_struct("attempt", ("domain",)) is Attempt  # nothing to add
    (got,) = read_struct(orjson.dumps({**VALID, "team-a": [1]}), b"\n", struct=struct)
    assert getattr(got, schemas.attribute(struct, "team-a")) == [1] and got.domain == "retail"
    (missing,) = read_struct(orjson.dumps(VALID), struct=struct)
    assert getattr(missing, schemas.attribute(struct, "team-a")) is None


def test_problem_still_explains_what_is_wrong():
    message = schemas.problem("attempt", {**VALID, "reward": None})
    assert message.startswith("attempt record.reward: None is not one of [0, 1]")
    assert schemas.fast_check("task")(b'{"id": "x"}') is False  # kinds without a Struct


def test_loc_is_a_cheap_tuple_that_prints_file_line():
    loc = Loc("a.jsonl", 7)
    assert str(loc) == "a.jsonl:7" and loc.file == "a.jsonl" and loc.line == 7
    assert loc == Loc("a.jsonl", 7) and hash(loc) == hash(Loc("a.jsonl", 7))


def _write(path, rows):
    path.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


def _attempts(n):
    return [{"task_id": f"t{i % 7}", "attempt": i // 7, "status": "ok", "reward": i % 2}
            for i in range(n)]


def _count(recs):
    out = {}
    for r in recs:
        out[r["task_id"]] = out.get(r["task_id"], 0) + r["reward"]
    return out


def _merge(parts):
    out = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


@pytest.fixture
def small_parallel(monkeypatch):
    monkeypatch.setattr(records, "PARALLEL_MIN_BYTES", 1)


def test_fold_in_processes_equals_serial(tmp_path, small_parallel):
    a = _write(tmp_path / "a.jsonl", _attempts(500))
    b = _write(tmp_path / "b.jsonl", [b"\n", *_attempts(333)])
    serial = fold_jsonl([a, b], "attempt", _count, _merge, workers=1)
    assert records._split([a, b], 3) is not None
    for workers in (2, 3, 5):
        assert fold_jsonl([a, b], "attempt", _count, _merge, workers=workers) == serial
    assert serial == _merge([_count(r for _, r in read_jsonl([a, b], "attempt"))])
    typed = fold_jsonl([a, b], "attempt", _count_struct, _merge, workers=3, struct=Attempt)
    assert typed == serial


def _count_struct(recs):
    return _count({"task_id": r.task_id, "reward": r.reward} for r in recs)


def test_fold_in_processes_reports_the_first_bad_line(tmp_path, small_parallel):
    rows = _attempts(400)
    rows[150] = b'{"task_id": "t", "attempt": 0}\n'
    rows[390] = b"not json\n"
    path = _write(tmp_path / "a.jsonl", rows)
    with pytest.raises(InputError) as serial:
        fold_jsonl([path], "attempt", _count, _merge, workers=1)
    with pytest.raises(InputError) as forked:
        fold_jsonl([path], "attempt", _count, _merge, workers=4)
    assert forked.value.message == serial.value.message
    assert serial.value.message.startswith(f"{path}:151: attempt record: 'reward' is a required")
    skip = SkipLog()
    fold_jsonl([path], "attempt", _count, _merge, workers=4, skip=skip)
    assert [str(loc) for loc, _ in skip.entries] == [f"{path}:151", f"{path}:391"]
    with pytest.raises(InputError) as typed:
        fold_jsonl([path], "attempt", _count_struct, _merge, workers=4, struct=Attempt)
    assert typed.value.message == serial.value.message
