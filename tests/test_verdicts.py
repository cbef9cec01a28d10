"""Task lines judged valid are remembered across processes (core/records/verdicts.py): the same
bytes skip jsonschema next time; an edited line, an edited schema or a bad line is judged again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

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


def test_an_unwritable_or_garbled_cache_only_costs_the_judging(fresh, monkeypatch, tmp_path, capsys):
    cache = verdicts.Verdicts("task").path
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not a list of digests")
    calls = judged(monkeypatch)
    assert len(read(TASKS)) == len(calls)  # judged as if there were none
    cache.unlink()
    cache.mkdir()  # the file cannot be written: a warning, and the next run judges again
    verdicts.of("task").save()
    assert cache.is_dir()
    err = capsys.readouterr().err
    assert "warning: cannot keep task verdicts in" in err and "ENDSTATE_CACHE" in err, err


# -- a cache someone else could have written is never believed ----------------------------------

def planted(lines: list[bytes]) -> bytes:
    """A well-formed cache file claiming `lines` valid: checksum and all, as anyone who reads the
    schemas (they are public) can make one."""
    v = verdicts.Verdicts("task")
    body = b"".join(sorted(verdicts._digest(line) for line in lines))
    return verdicts.MAGIC + v._checksum(body) + body


def an_invalid_task(tmp_path):
    """A task file whose one line has an extra field: valid JSON, invalid task."""
    task = {**orjson.loads(TASKS.read_bytes().splitlines()[0]), "run_this": "too"}
    path = tmp_path / "bad.jsonl"
    path.write_bytes(orjson.dumps(task) + b"\n")
    return path, orjson.dumps(task)


@pytest.mark.parametrize("how", ["writable by others", "owned by another user"])
def test_a_planted_verdict_is_ignored_and_the_file_replaced(fresh, tmp_path, how, capsys):
    path, line = an_invalid_task(tmp_path)
    cache = verdicts.Verdicts("task").path
    cache.parent.mkdir(parents=True)
    cache.write_bytes(planted([line]))
    if how == "writable by others":
        cache.chmod(0o666)
    elif os.geteuid() == 0:
        os.chown(cache, 65534, 65534)
    else:
        pytest.skip("making a file another user owns needs root")
    with pytest.raises(InputError, match="run_this"):  # judged: the planted entry is not believed
        read(path)
    assert f"ignored the task verdict cache {cache}" in capsys.readouterr().err
    good = TASKS.read_bytes().splitlines()[0]
    verdicts.of("task").add(good)
    verdicts.of("task").save()
    info = cache.stat()
    assert info.st_uid == os.geteuid() and info.st_mode & 0o777 == 0o600
    fresh()
    assert verdicts.of("task").known(good) and not verdicts.of("task").known(line)


def test_a_well_formed_file_of_the_user_is_believed_and_a_corrupt_one_is_not(fresh, tmp_path):
    path, line = an_invalid_task(tmp_path)
    cache = verdicts.Verdicts("task").path
    cache.parent.mkdir(parents=True)
    data = planted([line])
    cache.write_bytes(data)
    cache.chmod(0o600)
    assert verdicts.Verdicts("task").known(line)  # the format is what the checks below reject
    cache.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit: the checksum fails
    fresh()
    with pytest.raises(InputError, match="run_this"):
        read(path)
    assert verdicts.of("task").distrusted


def run_reader(env: dict) -> subprocess.CompletedProcess:
    """A new process reading a task file, with a time limit: a hang is a failure, not a stuck run."""
    code = ("from endstate.core.records import jsonl; "
            f"print(len(list(jsonl.read_jsonl([{str(TASKS)!r}], 'task'))))")
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=120,
                          env={**os.environ, **env})


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_fifo_or_a_device_as_the_cache_neither_hangs_nor_crashes(fresh, tmp_path, kind):
    cache = verdicts.Verdicts("task").path
    cache.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(cache)
    else:
        cache.symlink_to("/dev/zero")
    p = run_reader({"ENDSTATE_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(len(TASKS.read_bytes().splitlines()))
    assert f"ignored the task verdict cache {cache}" in p.stderr
    assert cache.is_file() and not cache.is_symlink()  # replaced by a cache of this user
