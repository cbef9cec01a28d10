"""--plot: training curves from metrics.jsonl (matplotlib, the `stats` extra), and the held-out
evaluation's pass@1 with its interval when the run has one (OUT/eval/metrics.jsonl).

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


def figure(rows: list[dict], evals: list[dict] | None = None):
    """The panels of the metrics lines `rows` (2 × 3), and of the held-out `evals` beside them
    when given (2 × 4): a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    skipped = [r["step"] for r in rows if r.get("skipped")]
    fig, axes = plt.subplots(2, 4 if evals else 3, figsize=(16 if evals else 12, 6),
                             constrained_layout=True)
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
    if evals:
        _eval_panel(axes.flat[len(PANELS)], evals)
        axes.flat[-1].axis("off")
    if skipped:
        from matplotlib.patches import Patch

        fig.legend(handles=[Patch(color=SKIPPED, label="skipped step: no update")],
                   loc="outside upper center", frameon=False, fontsize=8)
    return fig


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


def plot_metrics(metrics_file: Path | str, target: Path | str) -> None:
    import matplotlib.pyplot as plt

    def lines(path: Path) -> list[dict]:
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]

    evals = Path(metrics_file).parent / "eval" / "metrics.jsonl"
    fig = figure(lines(Path(metrics_file)), lines(evals) if evals.exists() else None)
    fig.savefig(target, dpi=100)
    plt.close(fig)
