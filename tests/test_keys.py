"""A key per role (core/wire/keys.py): the agent, the simulated user and the judge each send the
key of their own environment variable, the shared OPENAI_API_KEY goes to one site only, flags
name variables and never take a secret, and no key reaches stderr, records, metrics,
TensorBoard or W&B, even from a server that echoes the request's headers. The hosts are
tests/openai_double.py servers on different ports (the edge endstate does not own), each
recording the Authorization header of every request it gets."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

from __future__ import annotations

import pytest
from grpo_fixtures import buttons, tiny_model  # noqa: F401 - pytest fixtures
from openai_double import HTTP_503, FakeEndpoint, Fault, always, gold_policy
from test_grpo_study import buttons_pool
from test_preflight import BENCH, JUDGED, chat_agent, one_task, records, tool

from endstate.core.episode.users import STOP
from endstate.core.wire.keys import ROLE_KEYS, SHARED, Role, resolve_keys

KEYS = {"agent": "sk-agent-1111", "user": "sk-user-2222", "judge": "sk-judge-3333"}
UNSET = {SHARED: "", **{v: "" for v in ROLE_KEYS.values()}}  # "" is unset, as for the OpenAI SDK


def user_llm(url: str, *more: str) -> list[str]:
    return ["--user", "llm", "--user-url", url, "--user-model", "user-m", *more]


def nowhere(key: str, *texts: str | bytes) -> bool:
    return all(key.encode() not in (t if isinstance(t, bytes) else t.encode()) for t in texts)


def test_each_role_sends_its_own_key_to_its_own_host_only(tmp_path):
    env = {**UNSET, SHARED: "sk-shared-9999", **{ROLE_KEYS[r]: k for r, k in KEYS.items()}}
    episodes = tmp_path / "episodes.jsonl"
    with FakeEndpoint(policy=gold_policy(BENCH), key=KEYS["agent"]) as agent, \
            FakeEndpoint(policy=lambda body: STOP, key=KEYS["user"]) as user, \
            FakeEndpoint(policy=lambda body: "YES", key=KEYS["judge"]) as judge:
        done, _ = tool("probe", one_task(tmp_path, JUDGED), *chat_agent(agent.base_url), "-n", "1",
                       *user_llm(user.base_url), "--judge-model", "judge-m", "--judge-base-url",
                       judge.base_url, "--judge-cache", str(tmp_path / "j.sqlite"),
                       "--episodes", str(episodes), env=env)
        sent = {"agent": agent.authorizations, "user": user.authorizations, "judge": judge.authorizations}
    assert done.returncode == 0, done.stderr
    for role, headers in sent.items():  # the preflight's requests and the run's, every one
        assert headers and set(headers) == {f"Bearer {KEYS[role]}"}, (role, set(headers))
    for key in [*KEYS.values(), "sk-shared-9999"]:
        assert nowhere(key, done.stdout, done.stderr, episodes.read_bytes())


def test_the_shared_key_goes_to_one_site_and_no_further(tmp_path):
    env = {**UNSET, SHARED: "sk-shared-9999"}
    with FakeEndpoint(policy=gold_policy(BENCH)) as agent, FakeEndpoint(policy=lambda body: STOP) as user:
        done, _ = tool("probe", one_task(tmp_path), *chat_agent(agent.base_url), "-n", "1",
                       *user_llm(user.base_url), env=env)
        to_agent, to_user = set(agent.authorizations), set(user.authorizations)
        # on purpose: the user's flag names the shared variable
        shared, _ = tool("probe", one_task(tmp_path), *chat_agent(agent.base_url), "-n", "1",
                         *user_llm(user.base_url, "--user-key-env", SHARED), env=env)
        to_user_now = set(user.authorizations)
    assert done.returncode == 0, done.stderr
    assert to_agent == {"Bearer sk-shared-9999"} and to_user == {None}
    port = lambda ep: ep.base_url.rsplit(":", 1)[1].split("/")[0]
    assert (f"warning: the user endpoint (http://127.0.0.1:{port(user)}) gets no API key: "
            f"$ENDSTATE_USER_API_KEY is unset, and $OPENAI_API_KEY goes only to the agent's host(s) "
            f"(http://127.0.0.1:{port(agent)})") in done.stderr
    assert shared.returncode == 0 and to_user_now == {None, "Bearer sk-shared-9999"}


def test_the_rule_by_hand():
    """Hosts are (scheme, host, port); the first role without a key of its own owns the shared one."""
    env = {SHARED: "s", "ENDSTATE_JUDGE_API_KEY": "j"}
    a, b = "http://h:8000/v1", "http://h:8001/v1"
    keys, warned = resolve_keys([Role("agent", [a], "ENDSTATE_AGENT_API_KEY"),
                                 Role("user", [a, "http://H:8000/other"], "ENDSTATE_USER_API_KEY"),
                                 Role("judge", [b], "ENDSTATE_JUDGE_API_KEY")], env)
    assert keys == {"agent": "s", "user": "s", "judge": "j"} and warned == {}
    keys, warned = resolve_keys([Role("agent", [], "ENDSTATE_AGENT_API_KEY"),  # local: no host
                                 Role("user", [b], "ENDSTATE_USER_API_KEY"),
                                 Role("judge", [a], "ENDSTATE_JUDGE_API_KEY")], {SHARED: "s"})
    assert keys == {"user": "s", "judge": None} and list(warned) == ["judge"]
    assert resolve_keys([Role("agent", [a], "MY_KEY")], {SHARED: "s", "MY_KEY": "m"})[0] == {"agent": "m"}
    assert resolve_keys([Role("user", [b], "ENDSTATE_USER_API_KEY")], {})[0] == {"user": None}


@pytest.mark.parametrize("args", [["--api-key", "sk-secret-5555"], ["--agent-key-env", "sk-secret-5555"]])
def test_a_flag_names_the_variable_and_never_echoes_a_secret(tmp_path, args):
    done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent("http://127.0.0.1:9/v1"), *args)
    assert done.returncode == 2 and "sk-secret-5555" not in done.stderr + done.stdout, done.stderr
    assert "--agent-key-env" in done.stderr


def test_a_server_that_echoes_the_headers_gets_its_key_redacted(tmp_path):
    """A 400 stops the run with the endpoint's words, a 503 past the retries is the episode's
    error message: both quote the request's headers here, and neither may carry the key."""
    env = {**UNSET, ROLE_KEYS["agent"]: KEYS["agent"]}
    with FakeEndpoint(policy=gold_policy(BENCH), faults=always(Fault("http", 400)), echo_headers=True,
                      preflight_faults=True) as ep:
        refused, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url), env=env)
    assert refused.returncode == 2 and "HTTP 400" in refused.stderr, refused.stderr
    with FakeEndpoint(policy=gold_policy(BENCH), faults=always(HTTP_503), echo_headers=True) as ep:
        failed, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url), env=env)
    assert failed.returncode == 0, failed.stderr
    [episode] = records(failed.stdout)
    assert episode["status"] == "system_error" and "request headers" in episode["error"]["message"]
    assert "Bearer <api key>" in refused.stderr and "Bearer <api key>" in episode["error"]["message"]
    for said in (refused.stderr, failed.stdout, failed.stderr):
        assert nowhere(KEYS["agent"], said)


def test_keys_reach_no_file_of_a_grpo_run(tmp_path, tiny_model, buttons):
    """metrics.jsonl, attempts, episodes, config.json, TensorBoard's events and W&B's offline run:
    searched byte for byte for the user's and the judge's keys."""
    pytest.importorskip("wandb")
    pool = buttons_pool(buttons, tmp_path / "pool.jsonl", "", "", judged=True, scripted=False)
    env = {**UNSET, ROLE_KEYS["user"]: KEYS["user"], ROLE_KEYS["judge"]: KEYS["judge"],
           "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_API_KEY": ""}
    out = tmp_path / "run"
    with FakeEndpoint(policy=lambda body: STOP, key=KEYS["user"]) as user, \
            FakeEndpoint(policy=lambda body: "YES", key=KEYS["judge"]) as judge:
        done, _ = tool("grpo", "train", "--pool", str(pool), "--model", str(tiny_model), "--domains",
                       buttons["domain"], "--deepspeed", "zero0", "--out", str(out), "--steps", "1",
                       "--batch-tasks", "2", "--group-size", "2", "--max-new-tokens", "3",
                       "--max-context", "512", "--no-few-shot", *user_llm(user.base_url),
                       "--judge-model", "judge-m", "--judge-base-url", judge.base_url,
                       "--judge-cache", str(tmp_path / "j.sqlite"), "--save-episodes",
                       "--report-to", "tensorboard", "--report-to", "wandb", env=env)
        sent = set(user.authorizations) | set(judge.authorizations)
    assert done.returncode == 0, done.stderr
    assert sent == {f"Bearer {KEYS['user']}", f"Bearer {KEYS['judge']}"}
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"metrics.jsonl", "attempts.jsonl", "episodes.jsonl", "config.json"} <= {p.name for p in files}
    assert any("tfevents" in p.name for p in files) and any(p.suffix == ".wandb" for p in files)
    for key in (KEYS["user"], KEYS["judge"]):
        assert nowhere(key, done.stdout, done.stderr, *(p.read_bytes() for p in files)), key
