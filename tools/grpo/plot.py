"""--plot: training curves from metrics.jsonl (matplotlib, the `stats` extra).

A skipped step (every advantage zero: no update) has no loss, gradient, entropy or update speed:
those panels leave a gap there, and every panel shades the step, instead of plotting loss 0 and
0 tokens/s as if an update had happened. Steps are integers on the axis.
"""

from __future__ import annotations

import math
from pathlib import Path

import orjson

PANELS = (("reward_mean", "reward (all clean episodes)"), ("zero_variance_frac", "zero-variance groups"),
          ("loss", "loss"), ("grad_norm", "grad norm"), ("entropy", "entropy / token"),
          ("tokens_per_s", "update tokens/s"))
UPDATE = {"loss", "grad_norm", "entropy", "tokens_per_s"}  # what a skipped step does not have
SKIPPED = "#d9d9d9"


def figure(rows: list[dict]):
    """The 2 × 3 panels of the metrics lines `rows` (a matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    skipped = [r["step"] for r in rows if r.get("skipped")]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, PANELS):
        steps = [r["step"] for r in rows]
        values = [float("nan") if r.get(key) is None or (key in UPDATE and r.get("skipped"))
                  else r[key] for r in rows]
        if any(not math.isnan(v) for v in values):  # a line, with gaps where a value is missing
            ax.plot(steps, values, marker="o", markersize=3)
        for step in skipped:
            ax.axvspan(step - 0.4, step + 0.4, color=SKIPPED, lw=0, zorder=0)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    if skipped:
        from matplotlib.patches import Patch

        fig.legend(handles=[Patch(color=SKIPPED, label="skipped step: no update")],
                   loc="outside upper center", frameon=False, fontsize=8)
    return fig


def plot_metrics(metrics_file: Path | str, target: Path | str) -> None:
    import matplotlib.pyplot as plt

    rows = [orjson.loads(line) for line in Path(metrics_file).read_bytes().splitlines() if line.strip()]
    fig = figure(rows)
    fig.savefig(target, dpi=100)
    plt.close(fig)
