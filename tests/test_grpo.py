"""grpo's pure parts, with numbers computed by hand: advantages, the clipped surrogate, each loss
aggregation, masking, the pool sampler, zero-variance replacement, system-error re-generation,
the all-zero-advantage skip, the config and the dry run."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

import math

import orjson
import pytest
import torch
from click.testing import CliRunner
from conftest import without_judge
from grpo_fixtures import buttons, tiny_model  # noqa: F401 - pytest fixtures
from numerics import approx

from endstate.grpo.algorithm import (
    aggregate,
    clipped_surrogate,
    group_advantages,
    kl_k3,
    normalizer,
    zero_variance,
)
from endstate.grpo.batch import collate, micro_batches, sample_of
from endstate.grpo.sampling import Group, PoolSampler, collect

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent

# -- advantages -------------------------------------------------------------------------------------


@pytest.mark.numerics
def test_advantages_std_normalized():
    # mean 0.25; sample std sqrt((0.75² + 3·0.25²)/3) = 0.5 → (1 − 0.25)/0.5 = 1.5, (0 − 0.25)/0.5 = −0.5;
    # float64, torch's std a running (Welford) update of ~3 roundings per reward, then sqrt and /
    assert group_advantages([1, 0, 0, 0], eps=0.0) == approx([1.5, -0.5, -0.5, -0.5], dtype=torch.float64,
                                                             terms=3 * 4 + 3)


@pytest.mark.numerics
def test_advantages_without_std_norm_are_reward_minus_mean():
    assert group_advantages([1, 1, 0, 0], std_norm=False) == [0.5, 0.5, -0.5, -0.5]  # 2/4: exact


def test_advantages_of_a_zero_variance_group_are_zero():
    assert group_advantages([1, 1, 1]) == [0.0, 0.0, 0.0]
    assert zero_variance([0, 0, 0]) and zero_variance([1, 1]) and not zero_variance([0, 1])


# -- the surrogate and the aggregations -------------------------------------------------------------

@pytest.mark.numerics
def test_clipped_surrogate_by_hand():
    # ratios e^0 = 1, e^0.5 ≈ 1.6487 (clipped to 1.2 for A > 0), e^-0.5 ≈ 0.6065 (clipped to 0.8 for A < 0)
    logp = torch.tensor([[0.0, 0.5, -0.5]])
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    s = clipped_surrogate(logp, old, adv, 0.2, 0.2)
    # e^0 = 1 and −1·1 are exact; 1 ± 0.2 is a float64 sum converted to float32: 2 roundings
    assert s.loss.tolist()[0] == approx([-1.0, -1.2, 0.8], dtype=torch.float32, terms=2, reference=float)
    assert s.clipped_high.tolist() == [[0.0, 1.0, 0.0]] and s.clipped_low.tolist() == [[0.0, 0.0, 1.0]]


@pytest.mark.numerics
def test_clip_high_is_asymmetric():
    s = clipped_surrogate(torch.tensor([[0.5]]), torch.zeros(1, 1), torch.ones(1, 1), 0.2, 0.28)
    assert s.loss.item() == approx(-1.28, dtype=torch.float32, terms=2, reference=float)  # as above


LOSS = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0]])  # (B, T)
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])  # 3 and 1 completion tokens
# Small integers summed and divided into dyadic or integer quotients: exact in float32, in any
# summation order, so the aggregations below compare with ==.


@pytest.mark.numerics
def test_token_mean():
    # (1 + 2 + 3 + 4) / 4 tokens = 2.5: masked 9s never count
    assert aggregate(LOSS, MASK, "token-mean", normalizer([3, 1], "token-mean", 8)).item() == 2.5


@pytest.mark.numerics
def test_seq_mean_token_mean():
    # ((1 + 2 + 3)/3 + 4/1) / 2 sequences = (2 + 4) / 2 = 3
    norm = normalizer([3, 1], "seq-mean-token-mean", 8)
    assert aggregate(LOSS, MASK, "seq-mean-token-mean", norm).item() == 3.0


@pytest.mark.numerics
def test_seq_mean_token_sum_norm():
    # (1 + 2 + 3 + 4) / (2 sequences × 8 max tokens) = 10/16
    norm = normalizer([3, 1], "seq-mean-token-sum-norm", 8)
    assert aggregate(LOSS, MASK, "seq-mean-token-sum-norm", norm).item() == 0.625


@pytest.mark.numerics
def test_micro_batch_shares_sum_to_the_batch_loss():
    norm = normalizer([3, 1], "token-mean", 8)
    parts = [aggregate(LOSS[i:i + 1], MASK[i:i + 1], "token-mean", norm).item() for i in range(2)]
    assert sum(parts) == 2.5  # 6/4 + 4/4: not the mean of the micro-batch means (2, 4)


def test_unknown_aggregation_is_refused():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate(LOSS, MASK, "sum", 1.0)


@pytest.mark.numerics
def test_kl_k3_by_hand():
    # r = log π_ref − log π = −1 → e^-1 + 1 − 1 = 0.3679; equal log-probs → 0. float32: an exp
    # (2 roundings) and two sums over |terms| ≤ e^-1 + 2, against math.exp in float64
    assert kl_k3(torch.tensor([0.0, -0.3]), torch.tensor([-1.0, -0.3])).tolist() == approx(
        [math.exp(-1), 0.0], dtype=torch.float32, terms=4, magnitude=math.exp(-1) + 2, reference=float)


# -- masking ----------------------------------------------------------------------------------------

TURNS = [{"prompt_ids": [10, 11, 12], "completion_ids": [20, 21], "logprobs": [-0.1, -0.2]},
         {"prompt_ids": [13], "completion_ids": [22], "logprobs": [-0.3]}]


def test_sample_concatenates_turns_and_marks_completions():
    s = sample_of(TURNS, advantage=0.5)
    assert s.ids == [10, 11, 12, 20, 21, 13, 22]
    assert s.completion == [False, False, False, True, True, False, True]
    assert s.completion_tokens == 3


def test_collate_shifts_masks_and_pads():
    long, short = sample_of(TURNS, 0.5), sample_of([{"prompt_ids": [1, 2], "completion_ids": [3],
                                                     "logprobs": [-0.9]}], -1.0)
    b = collate([long, short], pad_id=0)
    assert b.input_ids.tolist() == [[10, 11, 12, 20, 21, 13], [1, 2, 0, 0, 0, 0]]
    assert b.targets.tolist() == [[11, 12, 20, 21, 13, 22], [2, 3, 0, 0, 0, 0]]
    # position t predicts token t + 1: loss where the *target* was sampled
    assert b.mask.tolist() == [[0, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 0]]
    assert b.attention_mask.tolist() == [[1] * 6, [1, 1, 0, 0, 0, 0]]
    stored = approx([-0.1, -0.9], dtype=torch.float32, reference=float)  # float64 into float32: 1 rounding
    assert [b.old_logprobs[0, 2].item(), b.old_logprobs[1, 1].item()] == stored
    assert math.isnan(b.old_logprobs[0, 0].item())
    assert b.advantages[0].tolist() == [0.5] * 6 and b.advantages[1, :2].tolist() == [-1.0, -1.0]


def test_missing_logprobs_become_nan():
    s = sample_of([{"prompt_ids": [1], "completion_ids": [2, 3], "logprobs": None}], 1.0)
    assert all(math.isnan(x) for x in s.old_logprobs)


def test_micro_batches():
    assert [len(c) for c in micro_batches(list(range(7)), 3)] == [3, 3, 1]


# -- the pool sampler -------------------------------------------------------------------------------

def test_sampler_passes_without_replacement_and_resumes_exactly():
    a = PoolSampler(list("abcde"), seed=3)
    first = a.draw(5)
    assert sorted(first) == list("abcde")  # one full pass
    state = a.state_dict()
    later = a.draw(7)
    b = PoolSampler(list("abcde"), seed=999)
    b.load_state_dict(state)
    assert b.draw(7) == later


def test_sampler_skips_retired_tasks():
    s = PoolSampler(list("abc"), seed=0)
    s.retire("b")
    assert "b" not in s.draw(6)


# -- group collection -------------------------------------------------------------------------------

def scripted(outcomes: dict[str, list[list]]):
    """generate() that returns, per task, its next scripted rewards; records every call."""
    calls = []

    def generate(task_ids, round_):
        calls.append((round_, list(task_ids)))
        return [Group(t, outcomes[t].pop(0)) for t in task_ids]

    return generate, calls


def drawer(ids):
    it = iter(ids)
    return lambda n: [next(it) for _ in range(n)]


def test_zero_variance_groups_are_replaced_by_fresh_tasks():
    generate, calls = scripted({"a": [[1, 1]], "b": [[0, 1]], "c": [[0, 0]], "d": [[1, 0]]})
    out = collect(drawer("abcd"), generate, want=2, max_rounds=4)
    assert [g.task_id for g in out.groups] == ["b", "d"]
    assert calls == [(0, ["a", "b"]), (1, ["c"]), (2, ["d"])]
    assert (out.rounds, out.zero_variance, out.refills) == (3, 2, 2)
    assert [e["zero_variance"] for e in out.log] == [1, 1, 0]


def test_replacement_stops_at_the_round_bound():
    generate, calls = scripted({t: [[0, 0]] for t in "abcdef"})
    out = collect(drawer("abcdef"), generate, want=2, max_rounds=2)
    assert out.groups == [] and out.rounds == 2 and out.zero_variance == 4
    assert len(calls) == 2


def test_system_error_group_is_regenerated_never_scored():
    generate, calls = scripted({"a": [[1, None], [0, 1]], "b": [[0, 1]]})
    out = collect(drawer("ab"), generate, want=2, max_rounds=4)
    assert calls == [(0, ["a", "b"]), (1, ["a"])]  # the same task again, not a fresh one
    assert [g.rewards for g in out.groups] == [[0, 1], [0, 1]]
    assert (out.system_error_groups, out.regenerated, out.system_error_dropped) == (1, 1, 0)


def test_system_error_regeneration_is_bounded():
    generate, calls = scripted({"a": [[None, 1]] * 3, "b": [[0, 1]], "c": [[1, 0]]})
    out = collect(drawer("abc"), generate, want=2, max_rounds=4, max_regenerations=1)
    # round 0: a errs (regenerate), b ok; round 1: a errs again, bound hit → dropped; round 2: c
    assert calls == [(0, ["a", "b"]), (1, ["a"]), (2, ["c"])]
    assert (out.system_error_groups, out.regenerated, out.system_error_dropped) == (2, 1, 1)
    assert [g.task_id for g in out.groups] == ["b", "c"]


def test_pending_regeneration_at_the_round_bound_counts_as_dropped():
    generate, _ = scripted({"a": [[None, 1]], "b": [[0, 1]]})
    out = collect(drawer("ab"), generate, want=2, max_rounds=1)
    assert (out.regenerated, out.system_error_dropped) == (0, 1)


# -- the all-zero-advantage skip (through the engine) -----------------------------------------------

def test_step_is_skipped_when_every_advantage_is_zero(tmp_path, tiny_model, buttons):
    """An all-zero batch must not move the weights: not even AdamW's weight decay may act."""
    from endstate.grpo.config import TrainConfig
    from endstate.grpo.train import Trainer

    cfg = TrainConfig(pool=buttons["pool"], model=str(tiny_model), out=str(tmp_path / "run"),
                      domains=[buttons["domain"]], steps=1, batch_tasks=1, group_size=2,
                      max_rounds=1, max_new_tokens=1, max_context=512, few_shot=False,
                      deepspeed="zero0", lr=0.1, weight_decay=0.5, temperature=0.0, rebucket=True)
    trainer = Trainer(cfg)  # temperature 0 and one token: both rollouts alike, zero variance
    before = {k: v.clone() for k, v in trainer.policy.module.state_dict().items()}
    metrics = trainer.train_step()
    assert metrics["skipped"] is True and metrics["groups"] == 0 and metrics["zero_variance"] == 1
    assert metrics["loss"] is None and metrics["tokens_per_s"] is None  # no update, not a loss of 0
    pool = metrics["pool"]  # --rebucket logs the pool each step, skipped or not
    assert pool["active"] + pool["resting"] + pool["retired"] == len(trainer.sampler.ids)
    assert sum(pool["bands"].values()) == pool["active"] + pool["resting"]
    after = trainer.policy.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


# -- config and dry run -----------------------------------------------------------------------------

def test_yaml_then_flags(tmp_path):
    from endstate.grpo.config import resolve

    y = tmp_path / "c.yaml"
    y.write_text("pool: p.jsonl\nlr: 2.0e-6\nsteps: 7\n")
    cfg = resolve(str(y), {"steps": 3, "lr": None})
    assert (cfg.pool, cfg.lr, cfg.steps) == ("p.jsonl", 2e-6, 3)


def test_yaml_with_an_unknown_key_is_refused(tmp_path):
    from endstate.core.errors import EndstateError
    from endstate.grpo.config import resolve

    y = tmp_path / "c.yaml"
    y.write_text("pool: p.jsonl\nlearning_rate: 1\n")
    with pytest.raises(EndstateError, match="unknown key.*learning_rate"):
        resolve(str(y), {})


def dry_run_refusing(tmp_path, line: str):
    """(config path, output) of `grpo train --dry-run` on a config with `line` added; it must be a
    usage error (exit 2) without a traceback."""
    from endstate.grpo.cli import cli

    y = tmp_path / "c.yaml"
    y.write_text(f"pool: {without_judge(ROOT / 'tasks/train/retail.jsonl')}\n{line}\n")
    result = CliRunner().invoke(cli, ["train", "--config", str(y), "--out", str(tmp_path / "r"), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return y, result.output


@pytest.mark.parametrize("line, expected", [
    ("temperature: -3", "temperature: -3.0 is not in the range 0<=x<=100"),
    ("top_p: 7", "top_p: 7.0 is not in the range 0<x<=1"),
    ("top_p: .nan", "top_p: nan is not a finite number"),
    ("max_new_tokens: 0", "max_new_tokens: 0 is not in the range 1<=x<=1048576"),
    ("lr: -1.0e-5", "lr: -1e-05 is not in the range 0<x<=1"),
    ("group_size: 1000000000000000000000000000000", "group_size: 1000000000000000000000000000000 "
     "is not in the range 1<=x<=10000"),
    ("clip_low: 5", "clip_low: 5.0 is not in the range 0<=x<=1"),
    ("keep: [nosuchband]", "keep: no band named nosuchband"),
    ("top_k: 1180591620717411303424", "top_k: 1180591620717411303424 is not in the range"),
])
def test_yaml_values_meet_the_ranges_of_their_flags(tmp_path, line, expected):
    _, output = dry_run_refusing(tmp_path, line)
    assert expected in output


@pytest.mark.parametrize("line, expected", [
    ('steps: "ten"', "steps: expected an integer, got 'ten'"),
    ("lr: fast", "lr: expected a number, got 'fast'"),
    ("std_norm: 1", "std_norm: expected true or false, got 1"),
    ("batch_tasks: true", "batch_tasks: expected an integer, got True"),
    ("max_turns: [3]", "max_turns: expected an integer or null, got [3]"),
    ("keep: 5", "keep: expected a list of strings"),
])
def test_yaml_with_a_wrongly_typed_value_is_a_usage_error(tmp_path, line, expected):
    y, output = dry_run_refusing(tmp_path, line)
    assert f"{y}: {expected}" in output


def test_yaml_ints_are_numbers_and_null_is_an_optional_value(tmp_path):
    from endstate.grpo.config import resolve

    y = tmp_path / "c.yaml"
    y.write_text("pool: p.jsonl\nlr: 1\nmax_turns: null\nkeep: hard,medium\n")
    cfg = resolve(str(y), {})
    assert (cfg.lr, cfg.max_turns, cfg.keep) == (1, None, ["hard", "medium"])


def test_dry_run_rejects_a_pool_whose_domain_does_not_exist(tmp_path):
    import orjson

    from endstate.grpo.cli import cli

    task = orjson.loads((ROOT / "tasks/train/retail.jsonl").read_bytes().splitlines()[0])
    pool = tmp_path / "pool.jsonl"
    pool.write_bytes(orjson.dumps({**task, "domain": "nowhere"}) + b"\n")
    result = CliRunner().invoke(cli, ["train", "--pool", str(pool), "--out", str(tmp_path / "r"), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "unknown domain 'nowhere'" in result.output and "--domains DIR" in result.output


def test_a_pool_with_benchmark_tasks_is_refused_naming_them(tmp_path):
    """The leak guard: bench and ood tasks never go into a training pool by accident."""
    import orjson

    from endstate.grpo.cli import cli

    train = orjson.loads((ROOT / "tasks/train/retail.jsonl").read_bytes().splitlines()[0])
    bench = orjson.loads((ROOT / "tasks/bench/retail.jsonl").read_bytes().splitlines()[0])
    pool = tmp_path / "pool.jsonl"
    pool.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in (train, bench)))
    args = ["train", "--pool", str(pool), "--out", str(tmp_path / "r"), "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert f"1 task(s) of a held-out split (bench 1) in {pool} would go into a training pool: " \
        f"{bench['id']} (bench);" in result.output
    assert "--allow-bench (YAML: allow_bench: true)" in result.output
    assert CliRunner().invoke(cli, [*args, "--allow-bench"]).exit_code == 0
    y = tmp_path / "c.yaml"
    y.write_text("allow_bench: true\n")
    assert CliRunner().invoke(cli, [*args, "--config", str(y)]).exit_code == 0


@pytest.mark.parametrize("flags, message", [
    ({"rollout_is": "tokens"}, "rollout_is 'tokens'"),
    ({"rollout_is_cap": 0.5}, r"rollout_is_cap: 0.5 is not in the range 1<=x"),
    ({"dual_clip": 1.0}, "above 1"), ({"log_ratio_clamp": 0.0}, r"log_ratio_clamp: 0.0 is not in the range 0<x"),
])
def test_off_policy_settings_are_checked(flags, message):
    from endstate.core.errors import EndstateError
    from endstate.grpo.config import resolve

    with pytest.raises(EndstateError, match=message):
        resolve(None, {"pool": "p.jsonl", **flags})


def test_rollout_correction_is_on_by_default_for_vllm_only():
    from endstate.grpo.config import TrainConfig
    from endstate.grpo.objective import LossConfig

    assert LossConfig.of(TrainConfig(rollout_engine="vllm", temperature=0.7)).rollout_is == "token"
    assert LossConfig.of(TrainConfig(rollout_engine="vllm", temperature=0.7)).temperature == 0.7
    assert LossConfig.of(TrainConfig(rollout_engine="local")).rollout_is == "off"
    assert LossConfig.of(TrainConfig(rollout_engine="local", rollout_is="sequence")).rollout_is == "sequence"
    assert LossConfig.of(TrainConfig(temperature=0.0)).temperature == 1.0  # greedy: raw logits


def test_world_size_divisibility_is_checked():
    from endstate.core.errors import EndstateError
    from endstate.grpo.config import resolve

    with pytest.raises(EndstateError, match="not divisible"):
        resolve(None, {"pool": "p.jsonl", "batch_tasks": 5, "group_size": 3, "nodes": 2})


def test_dry_run_with_the_reference_settings(tmp_path):
    from endstate.grpo.cli import cli

    args = ["train", "--config", str(ROOT / "configs/grpo.yaml"), "--pool", without_judge(ROOT / "tasks/train/retail.jsonl"),
            "--out", str(tmp_path / "run"), "--batch-tasks", "18", "--group-size", "8",
            "--steps", "50", "--save-freq", "5", "--nodes", "3", "--gpus-per-node", "8",
            "--device", "cuda", "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "batch_tasks: 18" in result.output and "steps: 50" in result.output
    assert "episodes_per_step: 144 (6 per rank)" in result.output
    launch = next(line for line in result.output.splitlines() if line.startswith("launch: "))
    assert launch.startswith("launch: torchrun --nnodes=3 --nproc-per-node=8 --rdzv-backend=c10d")
    assert f"-m endstate.grpo.cli train --config {ROOT / 'configs/grpo.yaml'}" in launch
    assert "--dry-run" not in launch
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_dry_run_on_one_cpu_prints_the_plain_command(tmp_path):
    from endstate.grpo.cli import cli

    pool = without_judge(ROOT / "tasks/train/retail.jsonl")
    result = CliRunner().invoke(cli, ["train", "--pool", pool, "--out", str(tmp_path / "r"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"launch: grpo train --pool {pool} --out {tmp_path / 'r'}"


# -- retirement and plots ---------------------------------------------------------------------------

def test_retire_moves_a_task_out_once_its_posterior_leaves_the_kept_bands(tmp_path):
    from endstate.grpo.retire import Retirement

    base = tmp_path / "base.jsonl"
    base.write_text("".join(f'{{"task_id": "a", "attempt": {i}, "reward": 1, "status": "ok"}}\n'
                            for i in range(4)))
    r = Retirement(["hard", "medium", "easy"], [str(base)])
    sampler = PoolSampler(["a", "b"], seed=0)
    # a: 4/4 base + 8/8 training = Beta(12.5, 0.5): most mass above 0.90 → too_easy
    # b: 4/8 → Beta(4.5, 4.5): medium, kept
    retired = r.update([Group("a", [1] * 8), Group("b", [1, 0] * 4)], sampler)
    assert retired == [{"task_id": "a", "band": "too_easy", "n": 12, "k": 12}]
    assert sampler.retired == {"a"} and r.band("b") == "medium"


def test_rebucket_retires_the_too_easy_rests_the_too_hard_and_logs_the_pool():
    from endstate.grpo.retire import Retirement

    r = Retirement(["hard", "medium", "easy"], rest_steps=2)
    sampler = PoolSampler(["a", "b", "c", "d"], seed=0)
    # a: 8/8 -> Beta(8.5, 0.5), too_easy: retired for good; c: 0/8 -> Beta(0.5, 8.5), too_hard:
    # rests through step 3; b: 4/8, medium, kept; d: not drawn yet
    metrics = r.step_metrics([Group("a", [1] * 8), Group("b", [1, 0] * 4), Group("c", [0] * 8)],
                             sampler, step=1)
    assert metrics["retired"] == [{"task_id": "a", "band": "too_easy", "n": 8, "k": 8}]
    assert metrics["rested"] == [{"task_id": "c", "band": "too_hard", "n": 8, "k": 0, "until": 3}]
    assert metrics["pool"] == {"active": 2, "resting": 1, "retired": 1, "bands": {
        "too_hard": 1, "hard": 0, "medium": 1, "easy": 0, "too_easy": 0, "unprobed": 1}}
    assert sampler.active == ["b", "d"]
    state = r.state_dict()
    again = Retirement(["hard", "medium", "easy"], rest_steps=2)
    again.load_state_dict(orjson.loads(orjson.dumps(state)))  # as a checkpoint holds it
    assert again.resting == {"c": 3} and again.counts["c"].runs == 8
    assert r.step_metrics([], sampler, step=2)["pool"]["resting"] == 1
    woken = r.step_metrics([], sampler, step=3)
    assert woken["pool"]["resting"] == 0 and sampler.active == ["b", "c", "d"]
    # drawn again, it solves some: its posterior (8 + 8 runs) puts it back in a kept band
    assert r.step_metrics([Group("c", [1, 1, 0, 1, 0, 1, 1, 0])], sampler, step=4)["rested"] == []
    assert r.band("c") == "hard" and "c" in sampler.active
    # without --rebucket a too-hard task is retired, as before, and no pool line is logged
    plain = Retirement(["hard", "medium", "easy"])
    s2 = PoolSampler(["c", "b"], seed=0)
    assert plain.step_metrics([Group("c", [0] * 8)], s2, step=1) == {
        "retired": [{"task_id": "c", "band": "too_hard", "n": 8, "k": 0}]}


def test_plot_writes_a_png(tmp_path):
    from endstate.grpo.plot import plot_metrics

    m = tmp_path / "metrics.jsonl"
    m.write_text('{"step": 1, "reward_mean": 0.1, "loss": 0.0}\n{"step": 2, "reward_mean": 0.3, "loss": -0.1}\n')
    plot_metrics(m, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 100032 vs 99926"),
    OSError(28, "No space left on device"),
])
def test_a_checkpoint_that_cannot_be_written_says_so_and_where_resume_starts(tmp_path, error):
    """A full disk during torch's save read as an internal error (exit 70) naming a file offset.
    The policy here stands in for DeepSpeed's save (an edge we do not own) and fails as it does."""
    from endstate.core.errors import ExitCode
    from endstate.grpo.checkpoint import save_checkpoint

    class FullDisk:
        def save(self, folder, client_state):
            folder.mkdir(parents=True)
            raise error

    (tmp_path / "checkpoints" / "step-000005").mkdir(parents=True)
    (tmp_path / "checkpoints" / "latest").write_text("step-000005\n")
    with pytest.raises(Exception) as caught:
        save_checkpoint(FullDisk(), tmp_path, 10, {}, {})
    message = caught.value.message
    assert caught.value.exit_code == ExitCode.IO and "step-000010: cannot save the checkpoint" in message
    assert str(error) in message and "GiB free on that disk" in message
    assert "--resume continues from step-000005" in message


def test_a_micro_batch_holds_samples_that_begin_alike_and_ranks_get_similar_lengths():
    """Two domains' samples (their system prompts differ), interleaved and of mixed lengths: each
    micro-batch holds one domain's (its prompt runs once there), longest first, and two ranks
    get the same number of sequences of similar length."""
    from endstate.grpo.batch import Sample
    from endstate.grpo.train import shard_samples

    def sample(domain: int, length: int) -> Sample:
        ids = [domain] * 300 + [7] * length
        return Sample(ids, [False] * 300 + [True] * length, [float("nan")] * len(ids), 1.0)

    samples = [sample(d, n) for n in (5, 40, 12, 33, 8, 21) for d in (1, 2)]
    mine = shard_samples(samples, 0, 1)
    chunks = micro_batches(mine, 3)
    assert [{s.ids[0] for s in c} for c in chunks] == [{1}, {1}, {2}, {2}]
    assert [len(s.ids) - 300 for s in mine[:6]] == [40, 33, 21, 12, 8, 5]
    halves = [shard_samples(samples, r, 2) for r in (0, 1)]
    assert [len(h) for h in halves] == [6, 6]
    assert all(abs(len(a.ids) - len(b.ids)) <= 12 for a, b in zip(*halves))
