"""Before any work, every endpoint a run names (agent, user, judge) answers one real request, or
the tool exits 2 naming the role, the endpoint and what it answered (core/wire/preflight.py).
The endpoints are dead ports and tests/openai_double.py (an OpenAI-compatible server with
injected faults: the edge endstate does not own), through the tools as a user runs them."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from conftest import BIN, ROOT
from grpo_fixtures import buttons, launcher_env, tiny_model  # noqa: F401 - pytest fixtures
from openai_double import HTTP_503, FakeEndpoint, Raw, always, gold_policy
from test_fault_containment import records, write_jsonl
from test_grpo_study import buttons_pool

RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"
JUDGED = "retail-cancel-with-confirmation"  # a bench task with a judge check


def dead_url() -> str:
    """The base URL of a port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def tool(name: str, *args: str, env: dict | None = None, unset: tuple[str, ...] = ()
         ) -> tuple[subprocess.CompletedProcess, float]:
    """Run a tool with `env` added to the tests' environment and the variables `unset` left out."""
    started = time.monotonic()
    base = {k: v for k, v in launcher_env().items() if k not in unset}
    done = subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=600,
                          env={**base, **(env or {})}, check=False)
    return done, time.monotonic() - started


BENCH = records(RETAIL.read_bytes())


def one_task(tmp_path, task_id: str = "retail-cancel-pending") -> str:
    task = next(t for t in BENCH if t["id"] == task_id)
    return write_jsonl(tmp_path / f"{task_id}.jsonl", [task])


def chat_agent(url: str) -> list[str]:
    return ["--backend", "chat", "--agent-url", url, "--model", "agent-m", "--retries", "2"]


def test_a_dead_agent_endpoint_stops_rollout_before_any_episode(tmp_path):
    url = dead_url()
    done, seconds = tool("rollout", "run", one_task(tmp_path), *chat_agent(url))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("preflight: 1 of 1 endpoint(s) failed before any work started:\n"
                                  f"  the agent endpoint {url} (model 'agent-m'): GET {url}/models: "
                                  "ConnectionRefusedError"), done.stderr
    assert "--no-preflight" in done.stderr and seconds < 60


def test_a_dead_user_endpoint_stops_probe_and_the_agent_is_never_asked(tmp_path):
    url = dead_url()
    with FakeEndpoint(policy=gold_policy(BENCH)) as agent:
        done, _ = tool("probe", one_task(tmp_path), *chat_agent(agent.base_url), "--user", "llm",
                       "--user-url", url, "--user-model", "user-m")
        asked = agent.requests
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert f"the user endpoint {url} (model 'user-m'): GET {url}/models: ConnectionRefusedError" \
        in done.stderr
    assert "the agent endpoint" not in done.stderr  # it answered
    assert asked == []  # no episode began


def test_a_dead_judge_endpoint_stops_probe_when_a_task_needs_it(tmp_path):
    url = dead_url()
    judge = ["--judge-model", "judge-m", "--judge-base-url", url, "--judge-cache", str(tmp_path / "j.sqlite")]
    with FakeEndpoint(policy=gold_policy(BENCH)) as agent:
        done, _ = tool("probe", one_task(tmp_path, JUDGED), *chat_agent(agent.base_url), "-n", "1", *judge)
        assert done.returncode == 2, done.stderr
        assert f"the judge endpoint {url} (model 'judge-m')" in done.stderr
        # a task without a judge check: the judge is not needed, so not asked
        fine, _ = tool("probe", one_task(tmp_path), *chat_agent(agent.base_url), "-n", "1", *judge)
    assert fine.returncode == 0, fine.stderr
    assert [a["status"] for a in records(fine.stdout)] == ["ok"]


BAD_ANSWERS = [  # (the double, what the refusal says)
    ({"served": ["other-m"]}, "/models serves [\"other-m\"], not model 'agent-m': pass the served name"),
    ({"faults": always(HTTP_503)}, "did not answer after 2 call(s): http_5xx: EndpointError: POST "),
    ({"key": "sk-only-this"}, "HTTP 401"),
    ({"policy": lambda body: Raw({"choices": []})},
     "answered, but not as an OpenAI-compatible endpoint: protocol: no choices[0].message object"),
]


@pytest.mark.parametrize("double, says", BAD_ANSWERS, ids=["not served", "503", "401", "protocol"])
def test_what_the_endpoint_answered_is_named(tmp_path, double, says):
    with FakeEndpoint(**{"policy": gold_policy(BENCH), **double}, preflight_faults=True) as ep:
        done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url))
    assert done.returncode == 2, done.stderr
    assert f"the agent endpoint {ep.base_url} (model 'agent-m'): " in done.stderr
    assert says in done.stderr, done.stderr
    if "key" in double:  # none was sent: the fix is named
        assert "no API key was sent: export ENDSTATE_AGENT_API_KEY (see --agent-key-env)" in done.stderr


def test_no_preflight_runs_anyway_and_a_live_endpoint_is_asked_one_token_first(tmp_path):
    url = dead_url()
    done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(url), "--no-preflight")
    assert done.returncode == 0, done.stderr
    assert [e["status"] for e in records(done.stdout)] == ["system_error"]
    with FakeEndpoint(policy=gold_policy(BENCH), served=["agent-m"], preflight_faults=True) as ep:
        done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url))
        first = ep.requests[0]
    assert done.returncode == 0, done.stderr
    assert first["max_tokens"] == 1 and first["model"] == "agent-m" and "tools" not in first
    assert "preflight: 1 endpoint(s) answered (agent)" in done.stderr
    quiet, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url), "-q", "--no-preflight")
    assert "preflight" not in quiet.stderr


@pytest.mark.parametrize("role", ["user", "judge"])
def test_grpo_refuses_a_dead_user_or_judge_before_loading_anything(tmp_path, tiny_model, buttons, role):
    """Before: 3 steps of 100% system errors, exit 0, and a checkpoint of the untrained model."""
    url = dead_url()
    pool = buttons_pool(buttons, tmp_path / "pool.jsonl", "", "", judged=role == "judge",
                        scripted=role == "judge")
    flags = (["--user", "llm", "--user-url", url, "--user-model", "user-m"] if role == "user" else
             ["--judge-model", "judge-m", "--judge-base-url", url])
    out = tmp_path / "run"
    done, seconds = tool("grpo", "train", "--pool", str(pool), "--model", str(tiny_model), "--domains",
                         buttons["domain"], "--deepspeed", "zero0", "--out", str(out), "--steps", "3",
                         *flags)
    assert done.returncode == 2, done.stderr
    assert f"the {role} endpoint {url} (model '{role}-m'): GET {url}/models: ConnectionRefusedError" \
        in done.stderr
    assert not out.exists()  # nothing written, no checkpoint
    print(f"\ngrpo train, dead {role} endpoint: exit {done.returncode} in {seconds:.1f} s\n{done.stderr}")
