"""JSONL reading and writing: FILE:LINE errors, --skip-invalid, stdin, SIGPIPE."""

import io

import orjson
import pytest
from conftest import BIN, ROOT

from endstate.core.errors import EndstateError, ExitCode, FileError, InputError
from endstate.core.records.jsonl import SkipLog, read_jsonl, write_jsonl

ATTEMPT = {"task_id": "t1", "attempt": 0, "reward": 1, "status": "ok"}


def lines(*records) -> bytes:
    return b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n" for r in records)


def test_reads_records_with_their_locations_and_skips_blank_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(lines(ATTEMPT, b"\n", {**ATTEMPT, "attempt": 1}))
    got = [(str(loc), r["attempt"]) for loc, r in read_jsonl([str(path)], "attempt")]
    assert got == [(f"{path}:1", 0), (f"{path}:3", 1)]


def test_malformed_line_stops_with_file_and_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(lines(ATTEMPT, b'{"task_id": "t2",\n'))
    with pytest.raises(InputError) as e:
        list(read_jsonl([str(path)], "attempt"))
    assert e.value.message.startswith(f"{path}:2: not valid JSON")
    assert e.value.exit_code == ExitCode.BAD_INPUT


def test_schema_violation_and_non_object_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(lines({**ATTEMPT, "status": "crashed"}))
    with pytest.raises(InputError, match=r"a.jsonl:1: attempt record.status: 'crashed' is not one of"):
        list(read_jsonl([str(path)], "attempt"))
    path.write_bytes(b"[1, 2]\n")
    with pytest.raises(InputError, match="a.jsonl:1: expected a JSON object, got list"):
        list(read_jsonl([str(path)], None))


def test_skip_invalid_keeps_going_and_remembers_every_skipped_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(lines(b"nope\n", ATTEMPT, {"task_id": "t1"}, {**ATTEMPT, "attempt": 2}))
    skip = SkipLog()
    got = [r["attempt"] for _, r in read_jsonl([str(path)], "attempt", skip=skip)]
    assert got == [0, 2]
    assert [str(loc) for loc, _ in skip.entries] == [f"{path}:1", f"{path}:3"]
    err = io.StringIO()
    skip.report(err)
    assert err.getvalue().startswith("skipped 2 invalid line(s):\n")


def test_missing_file_is_a_clear_error():
    with pytest.raises(FileError, match="nope.jsonl: cannot open: No such file or directory"):
        list(read_jsonl(["nope.jsonl"], None))


def test_write_jsonl_writes_whole_lines():
    out = io.BytesIO()
    assert write_jsonl([{"a": 1}, {"b": [1, 2]}], out) == 2
    assert out.getvalue() == b'{"a":1}\n{"b":[1,2]}\n'


def test_head_closing_the_pipe_is_not_an_error():
    """SIGPIPE is restored: `grade validate | head -1` ends quietly."""
    import subprocess

    grade = BIN / "grade"
    p = subprocess.run(f"'{grade}' validate | head -1", shell=True, capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 0
    assert orjson.loads(p.stdout)["sound"] is True
    assert "BrokenPipe" not in p.stderr and "Traceback" not in p.stderr


def test_ctrl_c_exits_130_not_1_which_means_no():
    """Ctrl-C is 128 + SIGINT, as a shell reports it; click's own "Aborted!" would exit 1."""
    import array
    import fcntl
    import signal
    import subprocess
    import termios
    import time

    evalstats = subprocess.Popen(  # SIGINT as a terminal delivers it (pytest-xdist workers ignore it)
        [str(BIN / "evalstats"), "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    evalstats.stdin.write(orjson.dumps(ATTEMPT).decode() + "\n")
    evalstats.stdin.flush()  # stdin stays open: it reads on, inside the command
    unread = array.array("i", [1])
    deadline = time.monotonic() + 120
    while unread[0] and time.monotonic() < deadline:  # until the command has taken the record
        time.sleep(0.05)
        fcntl.ioctl(evalstats.stdin.fileno(), termios.FIONREAD, unread)
    evalstats.send_signal(signal.SIGINT)
    out, err = evalstats.communicate(timeout=60)
    assert evalstats.returncode == ExitCode.INTERRUPTED == 130
    assert out == "" and err.strip() == "interrupted"


def test_an_episode_is_built_in_one_place_and_checked_against_its_schema():
    from endstate.core.records import schemas
    from endstate.core.records.jsonl import checked_line
    from endstate.core.records.structs import AssistantMessage, Episode, ToolCall, ToolMessage

    call = ToolCall.of("find", {"q": 1}, "c0")
    fields = dict(episode_id="t/0/x", task_id="t", domain="retail", attempt=0, status="ok",
                  termination="agent_done",
                  messages=[AssistantMessage(None, tool_calls=[call]), ToolMessage("c0", "find", "{}")],
                  changes={}, seed_digest="sha256:" + "0" * 64, usage={}, cost_usd=None)
    episode = Episode(**fields).record()
    assert schemas.problem("episode", episode) is None
    assert "turns" not in episode and "timing" not in episode  # unset optional fields are left out
    assert episode["messages"] == [  # OpenAI's shapes, keys in the order records have always had
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "find", "arguments": '{"q":1}'}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "find", "content": "{}"}]
    assert call.args() == {"q": 1} and call.name == "find"
    # a builder that passes the wrong type is refused where the line is written, never written
    with pytest.raises(EndstateError, match="attempt"):
        checked_line("episode", Episode(**{**fields, "attempt": "zero"}))
    with pytest.raises(TypeError, match="seed_digest"):
        Episode(**{k: v for k, v in fields.items() if k != "seed_digest"})


def test_an_attempt_is_built_through_the_schema_struct():
    from endstate.core.records import schemas
    from endstate.core.records.episode import attempt_record

    graded = {"task_id": "t", "domain": "retail", "attempt": 2, "reward": 1, "status": "ok",
              "policy": {"model": "m"}, "usage": {"agent": {"prompt_tokens": 3, "completion_tokens": 1}},
              "cost_usd": None, "episode_id": "t/2/x"}
    attempt = attempt_record(graded)
    assert list(attempt) == ["task_id", "domain", "attempt", "reward", "status", "model", "usage",
                             "cost_usd", "episode_id", "error", "prompting"]  # the schema's order
    assert schemas.problem("attempt", attempt) is None
    with pytest.raises(ValueError, match="reward must be null exactly when status is system_error"):
        attempt_record({**graded, "reward": None})
