"""Task lines judged valid are remembered across processes (core/records/verdicts.py): the same
bytes skip jsonschema next time; an edited line, an edited schema or a bad line is judged again."""

from __future__ import annotations

import shutil

import orjson
import pytest
from conftest import ROOT

from endstate.core.errors import InputError
from endstate.core.records import jsonl, schemas, verdicts

TASKS = ROOT / "tasks" / "bench" / "retail.jsonl"


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A new process, as far as verdicts go: an empty cache of its own (call again: the next one)."""
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))

    def new_process():
        for memo in (verdicts.of, schemas.fast_check):
            memo.cache_clear()
    new_process()
    yield new_process
    new_process()


def read(path):
    return [record for _, record in jsonl.read_jsonl([str(path)], "task")]


def judged(monkeypatch) -> list[str]:
    """The ids jsonschema judges from now on."""
    calls, problem = [], schemas.problem
    monkeypatch.setattr(schemas, "problem", lambda kind, record: calls.append(record.get("id")) or problem(kind, record))
    return calls


def test_a_file_read_again_skips_jsonschema_and_gives_the_same_records(fresh, monkeypatch):
    first = read(TASKS)
    verdicts.of("task").save()
    fresh()
    calls = judged(monkeypatch)
    assert read(TASKS) == first and calls == []
    assert len(verdicts.of("task").valid) == len(first)


def test_an_edited_line_is_judged_again_and_a_bad_one_always(fresh, monkeypatch, tmp_path):
    lines = TASKS.read_bytes().splitlines()[:3]
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    read(path)
    verdicts.of("task").save()
    fresh()
    task = orjson.loads(lines[1])
    task["max_turns"] = 7  # valid, other bytes
    bad = {**orjson.loads(lines[2]), "max_turns": "many"}
    path.write_bytes(b"\n".join([lines[0], orjson.dumps(task), orjson.dumps(bad)]) + b"\n")
    calls = judged(monkeypatch)
    with pytest.raises(InputError, match="max_turns"):
        read(path)
    assert calls == [task["id"], bad["id"]]
    verdicts.of("task").save()
    fresh()
    calls = judged(monkeypatch)
    with pytest.raises(InputError, match="max_turns"):  # the bad line is never remembered
        read(path)
    assert calls == [bad["id"]]


def test_verdicts_are_kept_per_schema(fresh, monkeypatch, tmp_path):
    before = verdicts.Verdicts("task").path
    edited = tmp_path / "schemas"
    shutil.copytree(schemas.SCHEMA_DIR, edited)
    (edited / "difficulty.schema.json").write_bytes((edited / "difficulty.schema.json").read_bytes() + b"\n")
    monkeypatch.setattr(verdicts, "SCHEMA_DIR", edited)  # a schema a task's refers to changed
    assert verdicts.Verdicts("task").path != before


def test_an_unwritable_or_garbled_cache_only_costs_the_judging(fresh, monkeypatch, tmp_path):
    cache = verdicts.Verdicts("task").path
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not a list of digests")
    calls = judged(monkeypatch)
    assert len(read(TASKS)) == len(calls)  # judged as if there were none
    cache.unlink()
    cache.mkdir()  # the file cannot be written: save says nothing, the next run judges again
    verdicts.of("task").save()
    assert cache.is_dir()
