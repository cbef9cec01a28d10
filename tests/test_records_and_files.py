"""Records and files a hostile sweep fed the tools: each gets the exit code and message docs/cli.md
gives it (a bad record: FILE:LINE and exit 4, skipped under --skip-invalid; a file that cannot be
written: exit 5 naming that file), never exit 70 or a silent exit 0. The tools run as a user runs
them, in subprocesses, against the project's OpenAI double."""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest
from conftest import BIN, ROOT, run_tool
from openai_double import FakeEndpoint, gold_policy
from test_fault_containment import records, retail_tasks, write_jsonl

from endstate.core.episode.plan import done_keys
from endstate.core.episode.replays import replay
from endstate.core.errors import InputError

RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"


def chat_args(tasks_file: str, url: str) -> list[str]:
    return [tasks_file, "--backend", "chat", "--agent-url", url, "--model", "d", "-n", "1", "-q"]


# -- --resume takes the records of the command's own stage -----------------------------------------

GRADED = {"episode_id": "e", "task_id": "t", "domain": "retail", "attempt": 0, "status": "ok",
          "messages": [], "changes": {}, "reward": 1, "checks": [], "grader": {}}
ATTEMPT = {"task_id": "t", "attempt": 0, "reward": 1, "status": "ok"}
TASK = {"id": "t", "domain": "retail", "user": {}, "checks": [{"kind": "sql"}]}


@pytest.mark.parametrize("kind, record, says", [
    ("attempt", GRADED, "this line is a graded episode"),
    ("episode", ATTEMPT, "this line is an attempt"),
    ("episode", TASK, "this line is a task"),
    ("attempt", {k: v for k, v in GRADED.items() if k not in ("reward", "checks", "grader")},
     "this line is an episode"),
])
def test_resume_refuses_a_file_of_another_stage_naming_its_line(tmp_path, kind, record, says):
    path = write_jsonl(tmp_path / "resume.jsonl", [record])
    with pytest.raises(InputError, match=f"{path}:1: --resume takes the records this command "
                                         f"writes, .*; {says}") as e:
        done_keys(path, kind=kind)
    assert e.value.exit_code == 4


def test_resume_reads_its_own_stage_as_before(tmp_path):
    episode = {k: v for k, v in GRADED.items() if k not in ("reward", "checks", "grader")}
    assert done_keys(write_jsonl(tmp_path / "a.jsonl", [ATTEMPT]), kind="attempt") == {("t", 0)}
    assert done_keys(write_jsonl(tmp_path / "e.jsonl", [episode]), kind="episode") == {("t", 0)}


def test_probe_and_rollout_refuse_to_resume_from_another_stage(tmp_path):
    """Before: graded episodes given to probe, or attempts to rollout, reported nothing left to do
    and exited 0."""
    tasks = retail_tasks(1)
    tasks_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        episodes = tmp_path / "graded.jsonl"
        first = run_tool("probe", *chat_args(tasks_file, endpoint.base_url), "--episodes", str(episodes))
        assert first.returncode == 0, first.stderr
        attempts = tmp_path / "attempts.jsonl"
        attempts.write_text(first.stdout)
        for tool, resume, says in (("probe", episodes, "a graded episode"),
                                   ("rollout", attempts, "an attempt")):
            cmd = [tool, "run"] if tool == "rollout" else [tool]
            p = run_tool(*cmd, *chat_args(tasks_file, endpoint.base_url), "--resume", str(resume))
            assert p.returncode == 4 and f"{resume}:1: --resume takes" in p.stderr, p.stderr
            assert says in p.stderr and p.stdout == ""


# -- grade: a diff holds SQLite values, a judge check needs a judge --------------------------------

def test_a_diff_value_that_is_an_object_is_bad_input_with_its_line(tmp_path, domains, tasks):
    """Before: exit 70 from grade and grade state."""
    task = tasks.get("retail-cancel-pending")
    episode = replay(domains["retail"], task, task["gold"])
    table = next(t for t, entry in episode["changes"].items() if entry.get("updated"))
    column = next(iter(episode["changes"][table]["updated"][0]["after"]))
    episode["changes"][table]["updated"][0]["after"][column] = {"nested": 1}
    path = write_jsonl(tmp_path / "e.jsonl", [episode])
    p = run_tool("grade", path)
    assert p.returncode == 4 and f"{path}:1:" in p.stderr and "a diff holds SQLite values" in p.stderr
    assert "Traceback" not in p.stderr
    p = run_tool("grade", "state", path, "-o", str(tmp_path / "end.db"))
    assert p.returncode == 4 and "a diff holds SQLite values" in p.stderr, p.stderr
    assert not (tmp_path / "end.db").exists()


def judged_task() -> dict:
    return next(t for t in map(orjson.loads, RETAIL.read_bytes().splitlines())
                if any(c["kind"] == "judge" for c in t["checks"]))


def test_a_judge_check_without_a_judge_is_bad_input_as_docs_say(tmp_path, domains):
    """Before: grade wrote a system_error and exited 0, where docs/cli.md promises exit 4."""
    task = judged_task()
    episode = replay(domains[task["domain"]], task, task["gold"])
    path = write_jsonl(tmp_path / "e.jsonl", [episode, episode])
    env = {"ENDSTATE_JUDGE_MODEL": "", "ENDSTATE_JUDGE_BASE_URL": ""}
    p = run_tool("grade", path, env=env)
    assert p.returncode == 4 and f"{path}:1: task {task['id']}" in p.stderr, p.stderr
    assert "has a judge check: pass --judge-model" in p.stderr and p.stdout == ""
    p = run_tool("grade", path, "--skip-invalid", env=env)
    assert p.returncode == 0 and p.stdout == "" and "skipped 2 invalid line(s)" in p.stderr, p.stderr
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert "a judge check and no judge) | found before the first episode: `FILE:LINE`, exit 4" in doc


def test_a_judge_cache_that_is_no_sqlite_file_is_a_usage_error_naming_the_flag(tmp_path, domains):
    """Before: exit 70."""
    task = judged_task()
    path = write_jsonl(tmp_path / "e.jsonl", [replay(domains[task["domain"]], task, task["gold"])])
    cache = tmp_path / "notes.txt"
    cache.write_text("not a database, just words " * 100)
    p = run_tool("grade", path, "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1",
                 "--judge-cache", str(cache))
    assert p.returncode == 2 and f"--judge-cache {cache}: cannot keep verdicts there" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


# -- tasks whose init does not apply ---------------------------------------------------------------

def test_a_task_whose_init_does_not_apply_is_named_before_any_episode(tmp_path):
    """Before: rollout exited 2 naming neither the file, the line nor the task; --skip-invalid did
    not skip it."""
    ok = retail_tasks(1)[0]
    broken = {**ok, "id": "broken-init", "init": {"orders": [{"no_such_column": 1}]}}
    tasks_file = write_jsonl(tmp_path / "t.jsonl", [ok, broken])
    with FakeEndpoint(policy=gold_policy([ok])) as endpoint:
        p = run_tool("rollout", "run", *chat_args(tasks_file, endpoint.base_url))
        assert p.returncode == 4 and f"{tasks_file}:2: task broken-init: its init does not apply" in p.stderr
        assert endpoint.requests == [], "an episode ran before the bad task was found"
        p = run_tool("rollout", "run", *chat_args(tasks_file, endpoint.base_url), "--skip-invalid")
    assert p.returncode == 0, p.stderr
    assert [e["task_id"] for e in records(p.stdout)] == [ok["id"]]


# -- files that cannot be written ------------------------------------------------------------------

def test_a_closed_stdout_is_an_io_error_saying_so():
    """Before: `grade tasks >&-` was exit 70."""
    p = subprocess.run(["bash", "-c", f'"{BIN / "grade"}" tasks >&-'], capture_output=True, text=True)
    assert p.returncode == 5 and "stdout is closed" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_a_full_episodes_file_is_named_not_stdout(tmp_path):
    """Before: probe --episodes /dev/full said `I/O error (writing to stdout)`."""
    tasks = retail_tasks(1)
    tasks_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        p = run_tool("probe", *chat_args(tasks_file, endpoint.base_url), "--episodes", "/dev/full")
    assert p.returncode == 5 and "/dev/full: cannot write: No space left on device" in p.stderr, p.stderr
    assert "stdout" not in p.stderr and "Traceback" not in p.stderr


def test_a_full_report_file_is_named_not_stdout():
    p = run_tool("evalstats", "report", "-o", "/dev/full", str(ROOT / "schemas" / "examples" / "attempt.json"))
    assert p.returncode == 5 and "/dev/full: cannot write: No space left on device" in p.stderr, p.stderr
    assert "stdout" not in p.stderr and "Traceback" not in p.stderr


# -- the chat backend keeps --max-context too -------------------------------------------------------

def test_max_context_ends_a_chat_episode_too(tmp_path):
    """Before: --backend chat ignored --max-context."""
    tasks = retail_tasks(1)
    tasks_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        p = run_tool("rollout", "run", *chat_args(tasks_file, endpoint.base_url),
                     "--max-new-tokens", "64", "--max-context", "32")
        assert endpoint.requests == []
    assert p.returncode == 0, p.stderr
    [episode] = records(p.stdout)
    assert episode["termination"] == "context_overflow" and episode["status"] == "ok"


# -- make demo, interrupted in grpo before its first checkpoint, runs again -------------------------

def test_a_grpo_run_without_a_checkpoint_is_started_again(tmp_path):
    """Before: the demo resumed grpo only when checkpoints/ existed, and grpo refuses an --out
    holding metrics.jsonl without --resume: a rerun stopped with exit 2."""
    script = ROOT / "scripts" / "grpo_resume.sh"
    cut = tmp_path / "cut"
    (cut / "checkpoints").mkdir(parents=True)
    (cut / "metrics.jsonl").write_text('{"step": 1}\n')
    done = subprocess.run([script, cut], capture_output=True, text=True, check=True)
    assert done.stdout == "" and not cut.exists()
    saved = tmp_path / "saved"
    (saved / "checkpoints").mkdir(parents=True)
    (saved / "checkpoints" / "latest").write_text("step-1")
    done = subprocess.run([script, saved], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "--resume" and saved.exists()
    for name in ("demo.sh", "demo_learn.sh"):
        assert "scripts/grpo_resume.sh" in (ROOT / "scripts" / name).read_text()
    assert os.access(script, os.X_OK)
