"""The band histogram: a table for stderr and, on request, a PNG; and the posterior figure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from endstate.bucket.pool import UNPROBED
from endstate.core.stats.bands import Bands


def histogram(records: Sequence[dict[str, Any]], names: Sequence[str]) -> list[tuple[str, int, int]]:
    """(band, tasks, kept) per band, in band order; then `unprobed` (no clean run) if any."""
    tasks = Counter(d["band"] for d in records)
    if tasks[UNPROBED]:
        names = [*names, UNPROBED]
    kept = Counter(d["band"] for d in records if d["keep"])
    return [(name, tasks[name], kept[name]) for name in names]


def table(records: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    rows = histogram(records, names)
    total = len(records)
    width = max(len("band"), len("total"), *(len(n) for n, _, _ in rows))
    lines = [f"{'band':<{width}}  {'tasks':>6}  {'share':>6}  {'kept':>6}"]
    for name, count, kept in rows:
        share = f"{100 * count / total:5.1f}%" if total else "     -"
        lines.append(f"{name:<{width}}  {count:>6}  {share:>6}  {kept:>6}")
    kept_total = sum(k for _, _, k in rows)
    lines.append(f"{'total':<{width}}  {total:>6}  {'100.0%' if total else '-':>6}  {kept_total:>6}")
    reasons = Counter(d["reason"] for d in records if not d["keep"])
    if reasons:
        lines.append("not kept: " + ", ".join(f"{r} {c}" for r, c in sorted(reasons.items())))
    return "\n".join(lines)


def figure(records: Sequence[dict[str, Any]], names: Sequence[str]):
    """The band histogram (tasks per band, the kept ones in front) as a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = histogram(records, names)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    x = range(len(rows))
    ax.bar(x, [c for _, c, _ in rows], color="#c9ced6", label="tasks")
    ax.bar(x, [k for _, _, k in rows], color="#2f6db5", label="kept")
    for i, (_, count, _) in enumerate(rows):
        ax.annotate(str(count), (i, count), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(x), [n for n, _, _ in rows])
    ax.set_ylabel("tasks")
    ax.set_title(f"difficulty bands ({len(records)} tasks, {sum(k for *_, k in rows)} kept)")
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def plot(records: Sequence[dict[str, Any]], names: Sequence[str], path: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(records, names)
    fig.savefig(path)
    plt.close(fig)


def posteriors_figure(records: Sequence[dict[str, Any]], bands: Bands):
    """Each probed task's posterior Beta(alpha, beta), coloured by its band (core.figures)."""
    from endstate.core.figures.posteriors import Posterior, posterior_figure

    probed = [Posterior(d["task_id"], d["alpha"], d["beta"], d["band"]) for d in records
              if d["band"] != UNPROBED]
    return posterior_figure([("difficulty posteriors", probed)], bands.edges, bands.names)


def plot_posteriors(records: Sequence[dict[str, Any]], bands: Bands, path: str) -> None:
    import matplotlib.pyplot as plt

    fig = posteriors_figure(records, bands)
    fig.savefig(path)
    plt.close(fig)
