"""The per-step metrics line of metrics.jsonl, and the update's statistics reduced over ranks."""

from __future__ import annotations

from typing import Any

from endstate.core.console.progress import episode_tokens
from endstate.grpo.batch import Sample
from endstate.grpo.objective import MAXIMA
from endstate.grpo.sampling import Collected


def reduce_stats(stats: dict[str, float], world: int, device) -> dict[str, float]:
    """Sums summed and maxima maxed over the ranks; grad_norm is already global. `device`: where
    the backend reduces (NCCL needs the GPU, gloo the CPU)."""
    values = {k: v for k, v in stats.items() if k != "grad_norm"}
    if world > 1:
        import torch
        import torch.distributed as dist

        for keys, op in ((sorted(set(values) - set(MAXIMA)), dist.ReduceOp.SUM),
                         (sorted(set(values) & set(MAXIMA)), dist.ReduceOp.MAX)):
            t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=device)
            dist.all_reduce(t, op=op)
            values.update(zip(keys, t.tolist()))
    return {**values, "grad_norm": stats["grad_norm"]}


def _ratio(stats: dict[str, float], numerator: str, denominator: str, empty: float | None = 0.0):
    d = stats.get(denominator, 0.0)
    return stats[numerator] / d if d else empty


def update_metrics(stats: dict[str, float], rollout_is: str) -> dict[str, Any]:
    """The update's part of the line: loss, clipping, entropy, KL, the rollout/trainer mismatch
    (`mismatch_mean`/`mismatch_max`: |log π_train − log π_rollout| over completion tokens with a
    sampler log-prob) and, with rollout_is on, the importance weights."""
    on = rollout_is != "off" and bool(stats.get("mismatch_tokens"))
    return {
        "loss": stats.get("loss"), "grad_norm": stats.get("grad_norm"),  # None: a skipped step
        "clip_frac": _ratio(stats, "clipped_low", "tokens") + _ratio(stats, "clipped_high", "tokens"),
        "clip_frac_low": _ratio(stats, "clipped_low", "tokens"),
        "clip_frac_high": _ratio(stats, "clipped_high", "tokens"),
        "dual_clip_frac": _ratio(stats, "dual_clipped", "tokens"),
        "entropy": _ratio(stats, "entropy", "tokens", None), "kl": _ratio(stats, "kl", "tokens"),
        "mismatch_mean": _ratio(stats, "mismatch", "mismatch_tokens", None),
        "mismatch_max": stats["mismatch_max"] if stats.get("mismatch_tokens") else None,
        "rollout_is": rollout_is,
        "is_weight_mean": _ratio(stats, "is_weight", "mismatch_tokens") if on else None,
        "is_weight_max": stats["is_weight_max"] if on else None,
        "is_truncated_frac": _ratio(stats, "is_truncated", "mismatch_tokens") if on else None,
    }


def role_usage(episodes: list[dict[str, Any]]) -> dict[str, int]:
    """What the simulated user and the judge cost this step's episodes: tokens, model calls, and
    verdicts the judge's cache answered."""
    total = {"user_tokens": 0, "user_calls": 0, "judge_tokens": 0, "judge_calls": 0,
             "judge_cache_hits": 0}
    for e in episodes:
        for role in ("user", "judge"):
            u = (e.get("usage") or {}).get(role) or {}
            total[f"{role}_tokens"] += u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
            total[f"{role}_calls"] += u.get("calls", 0)
        total["judge_cache_hits"] += ((e.get("usage") or {}).get("judge") or {}).get("cache_hits", 0)
    return total


def step_metrics(step: int, c: Collected, samples: list[Sample], stats: dict[str, float],
                 skipped: bool, step_s: float, rollout_s: float, update_s: float,
                 settings: dict[str, Any], empty_completions: int = 0) -> dict[str, Any]:
    """The train log's line for a step; `samples` are the trained episodes (`empty_completions`
    more sampled no token and were left out); `settings`: those a line records, with their values
    in force (grpo.settings.recorded: the policy loss, the advantage, the rollout_is level ...)."""
    clean = [r for g in c.generated for r in g.rewards if r is not None]
    clean_groups = [g for g in c.generated if not g.system_error]
    trained = [r for g in c.groups for r in g.rewards]
    tokens = sum(len(s.ids) for s in samples)
    return {
        "step": step,
        "reward_mean": sum(clean) / len(clean) if clean else None,  # every clean episode this step
        "batch_reward_mean": sum(trained) / len(trained) if trained else None,  # the trained groups
        "zero_variance_frac": c.zero_variance / len(clean_groups) if clean_groups else None,
        **c.counts(),
        "system_errors": sum(r is None for g in c.generated for r in g.rewards),
        "groups": len(c.groups), "episodes": len(samples), "empty_completions": empty_completions,
        "tokens": tokens,
        "completion_tokens": int(sum(s.completion_tokens for s in samples)),
        "generated_tokens": sum(episode_tokens(e) for g in c.generated for e in g.episodes),
        **role_usage([e for g in c.generated for e in g.episodes]),
        **update_metrics(stats, settings["rollout_is"]), **settings,
        "skipped": skipped, "step_s": round(step_s, 3), "rollout_s": round(rollout_s, 3),
        "update_s": round(update_s, 3), "tokens_per_s": round(tokens / update_s, 1) if update_s and tokens and not skipped else None,
        "rounds_log": c.log,
    }


def step_line(metrics: dict[str, Any], last_eval: float | None = None) -> str:
    """A step in a few words: its rounds, informative groups, reward and the last eval score."""
    reward = metrics["reward_mean"]  # None when every episode was a system error
    line = (f"{metrics['rounds']} round(s), {metrics['groups']} informative group(s), reward "
            f"{'n/a' if reward is None else f'{reward:.3f}'}")
    score = metrics.get("eval_pass_at_1", last_eval)
    return line + (f", eval pass@1 {score:.3f}" if score is not None else "")


def step_log(metrics: dict[str, Any]) -> str:
    """The log line of a finished step: step_line, its loss ('no update' when skipped), its time."""
    loss = "no update" if metrics["loss"] is None else f"loss {metrics['loss']:.4g}"
    return f"{step_line(metrics)}, {loss}, {metrics['step_s']:.1f}s"
