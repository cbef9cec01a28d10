"""grpo trains as the reference study trains: a simulated LLM user and an LLM judge inside the
training episodes (the OpenAI-compatible double stands in for the served models, with injected
faults: an endpoint we do not own), a held-out evaluation at step 0 and during the run, TensorBoard
event files read back with TensorBoard's own reader, W&B offline, and the refusals of what cannot
train, before step 1."""

# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name
from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest
from conftest import BIN
from grpo_fixtures import buttons, launcher_env, tiny_model  # noqa: F401 - buttons, tiny_model: fixtures
from openai_double import HTTP_500, FakeEndpoint, Raw, hang

from endstate.core.episode.users import STOP
from endstate.grpo.config import TrainConfig

MALFORMED = Raw({"id": "x", "choices": [{"index": 0, "message": None}]})  # breaks the contract


def buttons_pool(buttons, path, prefix: str, instruction: str, judged: bool, scripted: bool):
    """The buttons tasks, with turns for a conversation, an optional judge check, and their ids
    and user instruction changed (a held-out set differs in id and content)."""
    tasks = [json.loads(line) for line in open(buttons["pool"])]
    for t in tasks:
        t["id"] = prefix + t["id"]
        t["max_turns"] = 3
        t["user"] = {"instruction": instruction + t["user"]["instruction"], "opening": t["user"]["opening"],
                     **({"script": ["go on"]} if scripted else {})}
        if judged:
            t["checks"].append({"id": "asked", "kind": "judge",
                                "question": "Did the agent press the button the user named?"})
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def faults(plan: dict[int, object]):
    """Request number -> an injected fault (a 500, a hang past the client's timeout)."""
    return lambda i: plan.get(i)


def answering(reply, malformed_at: set[int]):
    """A chat policy giving `reply(body)`, and an answer that breaks the contract at the policy's
    calls numbered `malformed_at` (from 0; faulted requests never reach the policy)."""
    calls = iter(range(10 ** 9))
    return lambda body: MALFORMED if next(calls) in malformed_at else reply(body)


def config(model, buttons, out, **kw) -> TrainConfig:
    base = {"model": str(model), "out": str(out), "domains": [buttons["domain"]], "batch_tasks": 2,
            "group_size": 4, "lr": 2e-2, "max_new_tokens": 3, "max_context": 512, "few_shot": False,
            "deepspeed": "zero0", "micro_batch": 32, "save_freq": 100, "seed": 0, "temperature": 1.5}
    return TrainConfig(**{**base, **kw})


def rows(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_two_steps_with_an_llm_user_and_a_judge_that_fail_sometimes(tmp_path, tiny_model, buttons):
    from endstate.grpo.train import train

    pool = buttons_pool(buttons, tmp_path / "pool.jsonl", "", "", judged=True, scripted=False)
    held = buttons_pool(buttons, tmp_path / "held.jsonl", "eval-", "Held out. ", judged=False,
                        scripted=False)
    out = tmp_path / "run"
    # one call each, no retry (--retries 1), so each injected fault costs its episode: the user
    # answers a 500, hangs past --timeout, answers malformed; the judge a 500, then malformed
    user_says = answering(lambda body: "Yes, the red one, please." if len(body["messages"]) < 4
                          else STOP, malformed_at={3})
    with FakeEndpoint(policy=user_says, faults=faults({0: HTTP_500, 5: hang(3)})) as user, \
            FakeEndpoint(policy=answering(lambda body: "YES", malformed_at={0}),
                         faults=faults({0: HTTP_500})) as judge:
        history = train(config(tiny_model, buttons, out, pool=str(pool), steps=2, user="llm",
                               user_url=[user.base_url], user_model="user-double",
                               judge_model="judge-double", judge_base_url=judge.base_url,
                               judge_cache=str(tmp_path / "verdicts.sqlite"), timeout=1.0, retries=1,
                               eval_tasks=str(held), eval_every=1, eval_repeats=2,
                               max_rounds=6, max_regenerations=4), quiet=True)
        user_requests, judge_requests = len(user.requests), len(judge.requests)
    assert len(history) == 2
    lines = rows(out / "metrics.jsonl")
    assert sum(m["user_calls"] for m in lines) > 0 and sum(m["user_tokens"] for m in lines) > 0
    assert sum(m["judge_calls"] + m["judge_cache_hits"] for m in lines) > 0
    evals = rows(out / "eval" / "metrics.jsonl")
    attempts = rows(out / "attempts.jsonl")  # training and held-out: the faults hit either
    attempts += [a for e in evals for a in rows(out / "eval" / f"step-{e['step']:06d}.jsonl")]
    failed = [a for a in attempts if a["status"] == "system_error"]
    assert len(failed) == 5  # the user's three faults and the judge's two
    assert {a["error"]["kind"] for a in failed} >= {"http_5xx", "timeout", "protocol", "judge"}
    assert all(a["reward"] is None for a in failed)  # a failing user or judge is never a 0
    assert all(a["error"] is None for a in attempts if a["reward"] == 0)
    assert all("calls" in a["usage"]["user"] for a in attempts if a["status"] == "ok")
    judged = [a for a in attempts if "judge" in (a["usage"] or {})]
    assert judged and all({"calls", "cache_hits"} <= set(a["usage"]["judge"]) for a in judged)
    assert user_requests >= sum(m["user_calls"] for m in lines) and judge_requests >= 1
    # the held-out evaluation: step 0 (the base), then after each step, evalstats' own numbers
    assert [e["step"] for e in evals] == [0, 1, 2]
    assert all(e["attempts"] + e["system_errors"] == 8 * 2 for e in evals)
    for e in evals:
        episodes = rows(out / "eval" / f"step-{e['step']:06d}.jsonl")
        assert len(episodes) == 16 and {a["task_id"] for a in episodes} == {f"eval-{t['id']}" for t in
                                                                            map(json.loads, open(buttons["pool"]))}
        if e["pass_at_1"] is not None:
            low, high = e["pass_at_1_ci95"]
            assert low <= e["pass_at_1"] <= high
    assert [m.get("eval_pass_at_1") for m in lines] == [e["pass_at_1"] for e in evals[1:]]
    # TensorBoard's own reader sees every step's scalars and the evaluations
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"reward_mean", "loss", "user_calls", "judge_calls", "eval/pass_at_1"} <= tags
    assert [s.step for s in events.Scalars("reward_mean")] == [1, 2]
    assert [s.step for s in events.Scalars("eval/pass_at_1")] == [e["step"] for e in evals
                                                                  if e["pass_at_1"] is not None]


def test_wandb_offline_runs_without_a_network(tmp_path, tiny_model, buttons, monkeypatch):
    pytest.importorskip("wandb")
    from endstate.grpo.train import train

    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    train(config(tiny_model, buttons, out, pool=buttons["pool"], steps=1, report_to=["wandb"]),
          quiet=True)
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb")), runs


def grpo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "grpo"), "train", *args], capture_output=True, text=True,
                          env=launcher_env(), timeout=600, check=False)


def test_what_cannot_train_is_refused_before_step_1(tmp_path, tiny_model, buttons):
    judged = buttons_pool(buttons, tmp_path / "judged.jsonl", "", "", judged=True, scripted=True)
    common = ["--model", str(tiny_model), "--domains", buttons["domain"], "--deepspeed", "zero0",
              "--out", str(tmp_path / "run"), "--steps", "1"]
    no_judge = grpo("--pool", str(judged), *common)
    assert no_judge.returncode == 2, no_judge.stderr
    assert ("8 task(s) has a judge check: pass --judge-model and --judge-base-url (or set "
            "ENDSTATE_JUDGE_MODEL and ENDSTATE_JUDGE_BASE_URL): buttons-red-0, ") in no_judge.stderr
    unscripted = buttons_pool(buttons, tmp_path / "unscripted.jsonl", "", "", judged=False, scripted=False)
    no_script = grpo("--pool", str(unscripted), *common)
    assert no_script.returncode == 2
    assert ("8 task(s) have no user.script, reactions or default for --user scripted to say (each "
            "episode would end at the agent's first question): buttons-red-0, ") in no_script.stderr
    assert "run them with --user llm --user-url URL --user-model NAME" in no_script.stderr
    overlap = grpo("--pool", buttons["pool"], "--eval-tasks", buttons["pool"], *common)
    assert overlap.returncode == 2
    assert (f"8 task(s) of the pool are also held out in --eval-tasks {buttons['pool']} (same id or "
            "same content): buttons-blue-0") in overlap.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing started
    for stderr in (no_judge.stderr, no_script.stderr, overlap.stderr):
        assert "Traceback" not in stderr


@pytest.mark.parametrize("tool", ["probe", "rollout"])
def test_probe_and_rollout_refuse_a_task_their_user_cannot_play(tmp_path, buttons, tool):
    unscripted = buttons_pool(buttons, tmp_path / "unscripted.jsonl", "", "", judged=False, scripted=False)
    done = subprocess.run([str(BIN / tool), str(unscripted), "--domains", buttons["domain"]],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "8 task(s) have no user.script, reactions or default for --user scripted" in done.stderr


def test_the_plot_draws_the_eval_curve_with_its_interval(tmp_path):
    pytest.importorskip("matplotlib")
    from endstate.grpo.plot import plot_metrics

    (tmp_path / "eval").mkdir()
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(
        {"step": s, "reward_mean": 0.1 * s, "loss": 0.1, "zero_variance_frac": 0.5, "grad_norm": 1.0,
         "entropy": 2.0, "tokens_per_s": 100.0}) + "\n" for s in (1, 2)))
    (tmp_path / "eval" / "metrics.jsonl").write_text("".join(json.dumps(
        {"step": s, "pass_at_1": p, "pass_at_1_ci95": [max(0, p - 0.1), p + 0.1]}) + "\n"
        for s, p in ((0, 0.1), (1, 0.2), (2, 0.3))))
    plot_metrics(tmp_path / "metrics.jsonl", tmp_path / "training.png")
    assert (tmp_path / "training.png").stat().st_size > 10_000
    assert sys.modules["matplotlib"]  # drawn with matplotlib, the `stats` extra


def test_a_resumed_run_does_not_redo_an_evaluation(tmp_path, tiny_model, buttons):
    from endstate.grpo.train import train

    held = buttons_pool(buttons, tmp_path / "held.jsonl", "eval-", "Held out. ", judged=False,
                        scripted=True)
    out = tmp_path / "run"
    settings = dict(pool=buttons["pool"], eval_tasks=str(held), eval_every=1, eval_repeats=1,
                    save_freq=1, report_to=["none"])
    train(config(tiny_model, buttons, out, steps=1, **settings), quiet=True)
    first = (out / "eval" / "step-000001.jsonl").read_bytes()
    train(config(tiny_model, buttons, out, steps=2, resume=True, **settings), quiet=True)
    assert [e["step"] for e in rows(out / "eval" / "metrics.jsonl")] == [0, 1, 2]  # none twice
    assert (out / "eval" / "step-000001.jsonl").read_bytes() == first
    assert [m["step"] for m in rows(out / "metrics.jsonl")] == [1, 2]


# -- a run that cannot make progress stops ------------------------------------------------------------

def test_error_steps_in_a_row_stop_the_run_with_exit_6_and_no_checkpoint(tmp_path, tiny_model, buttons):
    """The tasks' one check is a judge's, and the judge answers its preflight, then only 503s:
    every episode of a step is a system error. Before: all 3 steps ran so, exit 0, and a `latest`
    checkpoint of the untrained model."""
    from openai_double import HTTP_503, always

    pool = buttons_pool(buttons, tmp_path / "pool.jsonl", "", "", judged=True, scripted=True)
    # the judge is always asked: no other check fails first (the footprint guard frees the table)
    guard = {"id": "footprint", "kind": "footprint", "free": ["buttons"]}
    tasks = [{**t, "checks": [*t["checks"][-1:], guard]} for t in rows(pool)]
    pool.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    out = tmp_path / "run"
    with FakeEndpoint(policy=lambda body: "YES", faults=always(HTTP_503)) as judge:
        done = grpo("--pool", str(pool), "--model", str(tiny_model), "--domains", buttons["domain"],
                    "--deepspeed", "zero0", "--out", str(out), "--steps", "3", "--save-freq", "1",
                    "--batch-tasks", "2", "--group-size", "2", "--max-new-tokens", "3",
                    "--max-context", "512", "--no-few-shot", "--judge-model", "judge-m",
                    "--judge-base-url", judge.base_url, "--judge-cache", str(tmp_path / "j.sqlite"),
                    "--retries", "1", "--report-to", "none")
    print(f"\ngrpo train, a judge endpoint answering 503: exit {done.returncode}\n{done.stderr[-1500:]}")
    assert done.returncode == 6, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo: 2 error step(s) in a row (step 1 to 2): every episode was a system "
                           "error, so nothing was trained (judge ×"), last
    assert "HTTP 503" in last and "0 update(s) so far, no checkpoint; fix what failed, then run again" in last
    lines = rows(out / "metrics.jsonl")
    assert [m["step"] for m in lines] == [1, 2]  # each error step is logged
    assert all(m["system_errors"] == m["groups_generated"] * 2 and m["loss"] is None for m in lines)
    assert not (out / "checkpoints").exists()


def test_checkpoints_follow_updates_and_the_summary_counts_them(tmp_path):
    """The bookkeeping of grpo/outcome.py by hand: a checkpoint only with an update since the last
    one; the error steps in a row reset by any other step and carried across a resume."""
    from endstate.core.errors import EndstateError, ExitCode
    from endstate.grpo.outcome import Outcome

    ok, failed = {"status": "ok"}, {"status": "system_error", "error": {"kind": "timeout", "message": "x"}}
    o = Outcome(max_error_steps=2)
    o.after_step(1, updated=False, episodes=[failed])  # an error step: nothing to checkpoint
    assert not o.checkpoint_due() and o.error_run == [1]
    o.after_step(2, updated=False, episodes=[ok, ok])  # no informative group: no update either
    assert not o.checkpoint_due() and o.error_run == []
    o.after_step(3, updated=True, episodes=[ok, failed])
    assert o.checkpoint_due()
    o.saved()
    assert not o.checkpoint_due()
    o.after_step(4, updated=False, episodes=[failed, failed])
    again = Outcome(max_error_steps=2)
    again.load_state_dict(o.state_dict())  # a resume keeps the count
    assert (again.updates, again.error_run, again.checkpoint_due()) == (1, [4], False)
    with pytest.raises(EndstateError, match=r"2 error step\(s\) in a row \(step 4 to 5\).*timeout ×2: x"
                                            r".*1 update\(s\) so far; fix what failed, then --resume") as stopped:
        again.after_step(5, updated=False, episodes=[failed, failed])
    assert stopped.value.exit_code == ExitCode.NO_PROGRESS == 6
    assert o.summary(4) == "4 step(s), 1 update(s), 1 without an informative group, 2 error step(s)"
