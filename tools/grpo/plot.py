"""--plot: training curves from metrics.jsonl (matplotlib, the `stats` extra)."""

from __future__ import annotations

from pathlib import Path

import orjson

PANELS = (("reward_mean", "reward (all clean episodes)"), ("zero_variance_frac", "zero-variance groups"),
          ("loss", "loss"), ("grad_norm", "grad norm"), ("entropy", "entropy / token"),
          ("tokens_per_s", "update tokens/s"))


def plot_metrics(metrics_file: Path | str, target: Path | str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [orjson.loads(line) for line in Path(metrics_file).read_bytes().splitlines() if line.strip()]
    evals = Path(metrics_file).parent / "eval" / "metrics.jsonl"
    fig, axes = plt.subplots(2, 4 if evals.exists() else 3, figsize=(16 if evals.exists() else 12, 6),
                             constrained_layout=True)
    if evals.exists():
        _eval_panel(axes.flat[len(PANELS)],
                    [orjson.loads(b) for b in evals.read_bytes().splitlines() if b.strip()])
        axes.flat[-1].axis("off")
    for ax, (key, title) in zip(axes.flat, PANELS):
        points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            ax.plot(*zip(*points), marker="o", markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.savefig(target, dpi=100)
    plt.close(fig)


def _eval_panel(ax, evals: list[dict]) -> None:
    """Held-out pass@1 at each evaluation with its 95% interval as a band (step 0: the base)."""
    points = sorted((e["step"], e["pass_at_1"], e["pass_at_1_ci95"]) for e in evals
                    if e.get("pass_at_1") is not None)
    if points:
        steps = [p[0] for p in points]
        ax.plot(steps, [p[1] for p in points], marker="o", markersize=3, color="tab:green")
        banded = [p for p in points if p[2]]
        ax.fill_between([p[0] for p in banded], [p[2][0] for p in banded], [p[2][1] for p in banded],
                        alpha=0.25, color="tab:green", linewidth=0)
        ax.set_xticks(steps)
    ax.set_title("held-out pass@1 (95% interval)")
    ax.set_xlabel("step")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
