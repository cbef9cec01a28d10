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
    fig, axes = plt.subplots(2, 3, figsize=(12, 6), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, PANELS):
        points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            ax.plot(*zip(*points), marker="o", markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.savefig(target, dpi=100)
    plt.close(fig)
