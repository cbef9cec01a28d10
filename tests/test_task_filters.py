"""`--task ID` and `--tag TAG` on rollout and probe, through the real command lines: the filter
(core.tasks.TaskFilter, the one `grade tasks --tag` uses) picks tasks before the runnability
checks, shards and --resume, and a filter that picks nothing is an error naming it."""

from __future__ import annotations

import orjson
from conftest import ROOT, run_tool
from openai_double import FakeEndpoint, gold_policy

RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"  # has judge tasks: probe cannot run those here
ALL = [orjson.loads(line) for line in RETAIL.read_bytes().splitlines() if line.strip()]


def chat(url: str) -> list[str]:
    return ["--backend", "chat", "--agent-url", url, "--model", "double", "-q"]


def records(text: str) -> list[dict]:
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def tagged(*tags: str) -> set[str]:
    return {t["id"] for t in ALL if set(t["tags"]) & set(tags)}


def test_rollout_takes_the_tasks_matching_every_filter():
    # ids are patterns (any of them), and --tag must hold too: cancel-* with single-write is one task
    with FakeEndpoint(policy=gold_policy(ALL)) as endpoint:
        p = run_tool("rollout", "run", str(RETAIL), *chat(endpoint.base_url),
                     "--task", "retail-cancel-*", "--task", "retail-update-address", "--tag", "single-write")
    assert p.returncode == 0, p.stderr
    episodes = records(p.stdout)
    assert sorted(e["task_id"] for e in episodes) == ["retail-cancel-pending", "retail-update-address"]
    openings = {t["user"]["opening"]: t["id"] for t in ALL}
    asked = {openings[m["content"]] for r in endpoint.requests for m in r["messages"]
             if m["role"] == "user" and m["content"] in openings}
    assert asked == {"retail-cancel-pending", "retail-update-address"}  # no other task reached the model


def test_probe_filters_before_the_judge_check_shards_and_resume(tmp_path):
    wanted = tagged("single-write", "multi-row")
    assert 3 < len(wanted) < len(ALL)
    shards = []
    with FakeEndpoint(policy=gold_policy(ALL)) as endpoint:
        common = [str(RETAIL), *chat(endpoint.base_url), "-n", "1", "--tag", "single-write", "--tag", "multi-r*"]
        for shard in ("0/2", "1/2"):
            p = run_tool("probe", *common, "--shard", shard)
            assert p.returncode == 0, p.stderr  # the file's judge tasks are not selected: no judge needed
            shards.append({a["task_id"] for a in records(p.stdout) if a["reward"] == 1})
        assert shards[0] | shards[1] == wanted and not shards[0] & shards[1]
        assert abs(len(shards[0]) - len(shards[1])) <= 1  # the shard cuts the filtered list
        attempts = tmp_path / "attempts.jsonl"
        p = run_tool("probe", *common, "--shard", "0/2")
        attempts.write_text(p.stdout)
        calls = len(endpoint.requests)
        p = run_tool("probe", *common, "--shard", "0/2", "--resume", str(attempts))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and len(endpoint.requests) == calls  # every filtered key is done


def test_a_filter_that_selects_nothing_is_an_error_naming_it():
    url = ["--backend", "chat", "--agent-url", "http://127.0.0.1:9/v1", "--model", "double"]
    p = run_tool("rollout", "run", str(RETAIL), *url, "--task", "retail-cancel-pendng")
    assert p.returncode == 2
    assert f"--task 'retail-cancel-pendng' selects no task in {RETAIL}" in p.stderr
    p = run_tool("probe", str(RETAIL), *url, "--task", "retail-*", "--tag", "no-such-tag")
    assert p.returncode == 2
    assert f"--task 'retail-*' --tag 'no-such-tag' selects no task in {RETAIL}" in p.stderr
