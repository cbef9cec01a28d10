"""Every example record in schemas/examples/ is what the tools write, produced here by them and
compared, so that none can drift from the code again (a hand-written difficulty.json once showed
hard 0.5841 for 3 of 8 where bucket computes 0.5396).

The chain: `grade tasks --full` writes the task; the gold replay that `grade validate` runs
writes the episode (core.episode.replays); `grade validate` the verdict; `grade` the graded
episode; probe's attempt_record the attempt (of that episode, as the embedded model's probe
records it); `bucket --all` the difficulty of 8 such attempts, 3 of them successes; `evalstats`
the metrics of those and 4 of a second task; `grade audit` the audit of a success on a third task
that escalated with a summary of its own.

Regenerate after a change that is meant: ENDSTATE_WRITE_EXAMPLES=1 pytest tests/test_examples.py
"""

from __future__ import annotations

import os

import orjson
import pytest
from conftest import ROOT, run_tool
from numerics import incbet_error

from endstate.core.agent.local_model import EMBEDDED
from endstate.core.agent.prompting import EMBEDDED_PROMPTING
from endstate.core.records.episode import attempt_record

EXAMPLES = ROOT / "schemas" / "examples"
WRITE = os.environ.get("ENDSTATE_WRITE_EXAMPLES") == "1"
TASK_ID = "retail-cancel-pending"
AUDITED_ID = "retail-refund-before-received-trap"  # its checks do not pin the escalation's summary


def jsonl(text: str) -> list[dict]:
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def lines(records) -> str:
    return "".join(orjson.dumps(r).decode() + "\n" for r in records)


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> dict[str, dict]:
    from endstate.core.env.domain import Domains
    from endstate.core.episode.replays import replay

    tmp = tmp_path_factory.mktemp("examples")
    out: dict[str, dict] = {}
    listed = run_tool("grade", "tasks", "--full", "--split", "bench", "--domain", "retail")
    assert listed.returncode == 0, listed.stderr
    out["task"] = next(t for t in jsonl(listed.stdout) if t["id"] == TASK_ID)
    task_file = tmp / "task.jsonl"
    task_file.write_text(lines([out["task"]]))
    verdict = run_tool("grade", "validate", str(task_file))
    assert verdict.returncode == 0, verdict.stderr
    out["verdict"] = jsonl(verdict.stdout)[0]
    out["episode"] = replay(Domains()["retail"], out["task"], out["task"]["gold"])
    episode_file = tmp / "episode.jsonl"
    episode_file.write_text(lines([out["episode"]]))
    graded = run_tool("grade", "--tasks", str(task_file), str(episode_file))
    assert graded.returncode == 0, graded.stderr
    out["graded_episode"] = jsonl(graded.stdout)[0]
    out["attempt"] = probed(out["graded_episode"], 3, 1)
    attempts = [probed(out["graded_episode"], a, int(a < 3)) for a in range(8)]
    attempts_file = tmp / "attempts.jsonl"
    attempts_file.write_text(lines(attempts))
    bucketed = run_tool("bucket", "--all", str(attempts_file))
    assert bucketed.returncode == 0, bucketed.stderr
    out["difficulty"] = jsonl(bucketed.stdout)[0]
    other = [{**probed(out["graded_episode"], a, r), "task_id": "retail-return-delivered",
              "episode_id": f"retail-return-delivered/{a}"} for a, r in enumerate([1, 1, 0, 1])]
    timeout = {**out["graded_episode"], "status": "system_error", "reward": None,
               "error": {"kind": "timeout", "message": "agent endpoint: no answer in 120 s"}}
    other.append({**probed(timeout, 4, None), "task_id": "retail-return-delivered",
                  "episode_id": "retail-return-delivered/4"})
    metrics_file = tmp / "metrics_attempts.jsonl"
    metrics_file.write_text(lines([*attempts, *other]))
    metrics = run_tool("evalstats", "--by", "domain", "--price", f"{EMBEDDED}=0.1,0.4",
                       str(metrics_file))
    assert metrics.returncode == 0, metrics.stderr
    out["metrics"] = orjson.loads(metrics.stdout)
    out["audit"] = audited(jsonl(listed.stdout), tmp)
    return out


def audited(tasks: list[dict], tmp) -> dict:
    """`grade audit`'s record of a success that escalated with its own summary, not gold's."""
    from endstate.core.env.domain import Domains
    from endstate.core.episode.replays import replay

    task = next(t for t in tasks if t["id"] == AUDITED_ID)
    steps = [{**s, "args": {**s["args"], "summary": "Wants a refund before the return arrives."}}
             if s.get("tool") == "transfer_to_human" else s for s in task["gold"]]
    task_file, episode_file = tmp / "audited_task.jsonl", tmp / "audited_episode.jsonl"
    task_file.write_text(lines([task]))
    episode_file.write_text(lines([replay(Domains()["retail"], task, steps)]))
    graded = run_tool("grade", "--tasks", str(task_file), str(episode_file))
    assert graded.returncode == 0, graded.stderr
    audit = run_tool("grade", "audit", "--tasks", str(task_file), input=graded.stdout)
    assert audit.returncode == 0, audit.stderr
    return jsonl(audit.stdout)[0]


def probed(graded: dict, attempt: int, reward: int) -> dict:
    """The attempt record probe writes for `graded` had the embedded model acted (its policy
    and token usage), as attempt `attempt` with `reward`."""
    policy = {"model": EMBEDDED, "backend": "local", "seed": 0,
              **{k: getattr(EMBEDDED_PROMPTING, k) for k in EMBEDDED_PROMPTING.__struct_fields__}}
    episode = {**graded, "attempt": attempt, "reward": reward, "policy": policy,
               "episode_id": f"{graded['task_id']}/{attempt}/7f3a",
               "usage": {"agent": {"prompt_tokens": 5120 + 64 * attempt, "completion_tokens": 211}},
               "cost_usd": 0.0}
    return attempt_record(episode)


@pytest.mark.parametrize("kind", ["task", "verdict", "episode", "graded_episode", "attempt",
                                  "difficulty", "metrics", "audit"])
def test_the_example_is_what_the_tool_writes(produced, kind):
    path = EXAMPLES / f"{kind}.json"
    one_line = kind in ("attempt", "difficulty", "verdict")
    if WRITE:
        option = 0 if one_line else orjson.OPT_INDENT_2
        path.write_bytes(orjson.dumps(produced[kind], option=option) + b"\n")
    example = orjson.loads(path.read_bytes())
    # difficulty's masses (differences of two beta CDFs, each within scipy's documented incbet
    # error of values at most 1) and interval: equal within that, absolutely (scipy 1.10, the
    # floor make compat runs, differs in the last digits)
    bound = 2 * incbet_error(example["alpha"], example["beta"]) if kind == "difficulty" else 0.0
    assert same_within(produced[kind], example, bound), (
        f"{path.relative_to(ROOT)} is not what the tool writes; if the change is meant, "
        "regenerate: ENDSTATE_WRITE_EXAMPLES=1 pytest tests/test_examples.py")


def same_within(a, b, bound: float) -> bool:
    """Equal records, floats within `bound` of each other (0: exactly equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_within(a[k], b[k], bound) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_within(x, y, bound) for x, y in zip(a, b))
    if type(a) is float and type(b) is float:
        return abs(a - b) <= bound
    return type(a) is type(b) and a == b


def test_every_example_is_produced():
    produced_kinds = {"task", "verdict", "episode", "graded_episode", "attempt", "difficulty",
                      "metrics", "audit"}
    assert {p.stem for p in EXAMPLES.glob("*.json")} == produced_kinds
