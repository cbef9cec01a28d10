"""evalstats' figures (matplotlib, Agg, imported only here): the cost vs pass@1 frontier, the
heatmaps, the per-task tally and the posteriors. Each `*_figure` returns the Figure (tests read
its texts and colours); `plot_*` saves one. Labels on a coloured cell take black or white,
whichever contrasts more with the cell (core.figures.contrast)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from endstate.core.figures.contrast import text_colour
from endstate.evalstats.render import _all_label, cross_metrics, pct, row_k, top_kmax

FRONT, OTHER = "#1f5fa8", "#6b7480"  # frontier points; the others (both read on white)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path) -> None:
    fig.savefig(path)
    _pyplot().close(fig)


def short(label: str, width: int = 28) -> str:
    """A label that fits a plot: a long one (a checkpoint's path) keeps its end; a `$` is a
    dollar sign, never the start of matplotlib's math (a name could not be drawn)."""
    label = label if len(label) <= width else "…" + label[-(width - 1):]
    return label.replace("$", r"\$")


def shorts(labels, width: int = 28) -> dict[str, str]:
    """Each label shortened (`short`) so that no two read alike: checkpoints of two runs
    (out/seed-0/.../step-10/hf, out/seed-1/.../step-10/hf) keep the path parts that tell them
    apart, then their last two (seed-0/…/step-10/hf)."""
    labels = list(dict.fromkeys(labels))
    out = {label: short(label, width) for label in labels}
    clashes: dict[str, list[str]] = {}
    for label in labels:
        clashes.setdefault(out[label], []).append(label)
    for same in (group for group in clashes.values() if len(group) > 1):
        parts = [label.split("/") for label in same]
        for label, mine in zip(same, parts):
            differ = [p for i, p in enumerate(mine[:-2])
                      if any(len(other) <= i or other[i] != p for other in parts if other is not mine)]
            out[label] = ("/".join([*differ, "…", *mine[-2:]]) if differ else label
                          ).replace("$", r"\$")
    return out


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of (pass@1, cost) points no other point beats on both (higher pass, lower cost)."""
    return [i for i, (p, c) in enumerate(points)
            if not any((q >= p and d <= c) and (q > p or d < c) for q, d in points)]


def heatmap(ax, rows, cols, values, labels, cmap, vmin, vmax, title):
    """An image of `values` (None: blank) with each cell's label in the colour that reads on it."""
    import numpy as np

    data = np.array([[np.nan if v is None else v for v in r] for r in values], dtype=float)
    im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    names = shorts([str(r) for r in rows], 36)
    ax.set_yticks(range(len(rows)), [names[str(r)] for r in rows])
    for i, r in enumerate(labels):
        for j, text in enumerate(r):
            shade = im.cmap(im.norm(data[i, j]))[:3] if not np.isnan(data[i, j]) else (1, 1, 1)
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=text_colour(shade))
    ax.set_title(title)
    return im


def colourbar(fig, im, ax, signed: bool = False):
    """A colour bar in the labels' unit: percent (points of a difference when `signed`)."""
    from matplotlib.ticker import FuncFormatter

    bar = fig.colorbar(im, ax=ax, fraction=0.046 if not isinstance(ax, list) else 0.03)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(
        (lambda v, _: f"{100 * v:+.1f}") if signed else (lambda v, _: f"{100 * v:.0f}%")))
    return bar


def priced_points(by_policy: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """policy -> (pass@1, USD per successful attempt), for the policies that have both."""
    return {m: (g["pass_at_1"], g["cost"]["per_success_usd"]) for m, g in by_policy.items()
            if g["pass_at_1"] is not None and g["cost"]["per_success_usd"] is not None}


def draw_frontier(ax, by_policy: dict[str, Any], arrows: Sequence[tuple[str, str]] = ()) -> None:
    """Cost per successful attempt against pass@1, one point per policy (two prompting policies
    of one model are two points), the Pareto frontier dashed, and an arrow from each BASE to
    its NEW (base → trained)."""
    models = priced_points(by_policy)
    if not models:
        ax.text(0.5, 0.5, "no cost data\n(cost_usd or --price)", ha="center", va="center",
                transform=ax.transAxes)
    else:
        pts = list(models.values())
        front = set(pareto(pts))
        names = shorts(models)
        for i, (name, (p, c)) in enumerate(models.items()):
            ax.scatter([p], [c], s=60, color=FRONT if i in front else OTHER, zorder=3)
            below = pts[:i].count((p, c))  # models at one point: their names one under another
            ax.annotate(names[name], (p, c), textcoords="offset points",
                        xytext=(5, 4 - 10 * below), fontsize=8)
        frontier = sorted(pts[i] for i in front)
        ax.plot([p for p, _ in frontier], [c for _, c in frontier], "--", color=FRONT,
                label="Pareto frontier")
        for base, new in arrows:
            if base in models and new in models:
                ax.annotate("", xy=models[new], xytext=models[base], zorder=2,
                            arrowprops={"arrowstyle": "-|>", "color": "#b34700", "lw": 1.5,
                                        "shrinkA": 6, "shrinkB": 6})
        if any(b in models and n in models for b, n in arrows):
            ax.plot([], [], color="#b34700", lw=1.5, label="base → trained")
        ax.legend(frameon=False, fontsize=8)
        ax.margins(0.15)
    ax.set_xlabel("pass@1")
    ax.set_ylabel("USD per successful attempt")
    ax.set_title("cost vs pass@1 by policy")


def domain_groups(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows of the domain heatmap: each policy's domains (by_policy.by_domain; named
    `domain · policy` when there are several policies, never pooled over them), else by_domain,
    else overall."""
    by_policy = report.get("by_policy") or {}
    nested = {p: g["by_domain"] for p, g in by_policy.items() if "by_domain" in g}
    if nested:
        names = shorts(nested, 24)
        return {(d if len(nested) == 1 else f"{d} · {names[p]}"): g
                for p, domains in nested.items() for d, g in domains.items()}
    return report.get("by_domain") or {"overall": report["overall"]}


def draw_domains(fig, ax, report: dict[str, Any]) -> None:
    """Domain × metric heatmap (pass@1, pass@k, pass^k, k/k at the largest k), in percent, per
    policy (domain_groups)."""
    groups = domain_groups(report)
    kmax = top_kmax(report)
    cols = ["pass@1", *([f"pass@{kmax}", f"pass^{kmax}"] if kmax else []),
            _all_label(row_k(groups))]
    values = [[g["pass_at_1"], *([g["pass_at_k"].get(kmax), g["pass_hat_k"].get(kmax)]
                                 if kmax else []), g["observed_all"]["fraction"]]
              for g in groups.values()]
    labels = [[pct(v) for v in r] for r in values]
    im = heatmap(ax, list(groups), cols, values, labels, "viridis", 0, 1, "by domain (%)")
    colourbar(fig, im, ax)


def metrics_figure(report: dict[str, Any], arrows: Sequence[tuple[str, str]] = ()):
    """summary --plot: left the frontier (report's by_policy), right the domain × metric
    heatmap."""
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(12, 4.8), dpi=110)
    draw_frontier(left, report["by_policy"], arrows)
    draw_domains(fig, right, report)
    fig.tight_layout()
    return fig


def plot_metrics(report, path, arrows=()) -> None:
    save(metrics_figure(report, arrows), path)


def domains_figure(report: dict[str, Any]):
    fig, ax = _pyplot().subplots(figsize=(6.4, 1.4 + 0.45 * len(domain_groups(report))),
                                 dpi=110)
    draw_domains(fig, ax, report)
    fig.tight_layout()
    return fig


def frontier_figure(by_policy: dict[str, Any], arrows: Sequence[tuple[str, str]] = ()):
    fig, ax = _pyplot().subplots(figsize=(6.4, 4.6), dpi=110)
    draw_frontier(ax, by_policy, arrows)
    fig.tight_layout()
    return fig


def cross_figure(report: dict[str, Any], first: str, second: str):
    """The first × second table as heatmaps (pass@1, pass@k, k/k), one panel per metric."""
    rows = report[f"by_{first}"]
    cols = sorted({c for g in rows.values() for c in g.get(f"by_{second}", {})})
    metrics = cross_metrics(top_kmax(report), row_k(rows))
    fig, axes = _pyplot().subplots(1, len(metrics), dpi=110, squeeze=False,
                                   figsize=(3.2 + 1.1 * len(cols) * len(metrics),
                                            1.4 + 0.5 * len(rows)), layout="constrained")
    for ax, (name, get) in zip(axes[0], metrics):
        values = [[None if (c := g.get(f"by_{second}", {}).get(col)) is None else get(c)
                   for col in cols] for g in rows.values()]
        im = heatmap(ax, list(rows), cols, values, [[pct(v) for v in r] for r in values],
                     "viridis", 0, 1, f"{name} (%)")
        if ax is not axes[0][0]:
            ax.set_yticks([])
    colourbar(fig, im, list(axes[0]))
    return fig


def compare_figure(report: dict[str, Any]):
    """Group × metric heatmap of NEW − BASE, each cell labelled base → new (Δ points). The
    colour scale is symmetric around 0 and never narrower than ±1 point."""
    groups = {"overall": report}
    for key, by in report.items():
        if key.startswith("by_"):
            groups.update({f"{key[3:]}={name}": g for name, g in by.items()})
    cols = ["pass@1", f"pass@{report['pass_at_k']['k']}", _all_label(report["observed_all"]["k"])]
    values, labels = [], []
    for g in groups.values():
        p1, pk, obs = g["pass_at_1"], g["pass_at_k"], g["observed_all"]
        cells = [(p1["base"], p1["new"], p1["delta"]), (pk["base"], pk["new"], pk["delta"]),
                 (obs["base_fraction"], obs["new_fraction"], obs["delta_fraction"])]
        values.append([d for _, _, d in cells])
        labels.append([f"{pct(b)}→{pct(n)}\n({'-' if d is None else f'{100 * d:+.1f}'})"
                       for b, n, d in cells])
    fig, ax = _pyplot().subplots(figsize=(7, 1.2 + 0.55 * len(groups)), dpi=110)
    top = max([0.01, *(abs(v) for r in values for v in r if v is not None)])
    im = heatmap(ax, list(groups), cols, values, labels, "RdBu", -top, top,
                 "new vs base: base → new % (Δ points)")
    colourbar(fig, im, ax, signed=True)
    fig.tight_layout()
    return fig


def plot_compare(report: dict[str, Any], path) -> None:
    save(compare_figure(report), path)


OUTCOME_ROWS = 60  # bars drawn when no --task is named; the table lists every task
SUCCESS, UNGRADED = "#2a7d3f", "#b8bec6"
CATEGORIES = ["#b34700", "#6a3d9a", "#1f5fa8", "#8c564b", "#c2185b", "#4d4d4d", "#7f7f00"]


def outcome_parts(record: dict[str, Any]) -> list[tuple[str, int]]:
    """(outcome, attempts) of one (policy, task): its successes, then its failed attempts by the
    checks that failed in them (the graded episodes'), or one "failed" without them; failed
    attempts no graded episode accounts for are "not graded"."""
    parts = [("success", record["successes"])]
    failed = record["n"] - record["successes"]
    if record.get("failures") is None:
        return parts + [("failed", failed)]
    for kind in record["failures"]:
        parts.append((" + ".join(kind["checks"]) or "failed, no check failed", kind["count"]))
        failed -= kind["count"]
    return parts + ([("not graded", failed)] if failed > 0 else [])


def outcomes_figure(records: Sequence[dict[str, Any]], tasks: Sequence[str] = ()):
    """The study's per-task figure: for each task (`tasks`, else the first ones) one bar per
    policy, its clean attempts split by outcome (outcome_parts), labelled successes / n."""
    plt = _pyplot()
    policies = list(dict.fromkeys(r["policy"] for r in records))
    every = list(dict.fromkeys(r["task_id"] for r in records))
    shown = list(tasks) or every[:max(1, OUTCOME_ROWS // max(len(policies), 1))]
    by_key = {(r["policy"], r["task_id"]): r for r in records}
    rows = [(t, p) for t in shown for p in policies if by_key.get((p, t), {}).get("n")]
    kinds = Counter()
    for key in rows:
        kinds.update({kind: n for kind, n in outcome_parts(by_key[key[::-1]])[1:]})
    colour = {"success": SUCCESS, "not graded": UNGRADED,
              **{k: CATEGORIES[i % len(CATEGORIES)] for i, (k, _) in
                 enumerate(kinds.most_common()) if k != "not graded"}}
    names = shorts(policies, 30)
    fig, ax = plt.subplots(figsize=(8.5, 1.6 + 0.28 * len(rows)), dpi=110, layout="constrained")
    drawn = set()
    for y, (task_id, policy) in enumerate(rows):
        r, left = by_key[(policy, task_id)], 0.0
        for kind, n in outcome_parts(r):
            if n:
                ax.barh(y, n / r["n"], left=left, height=0.8, color=colour[kind],
                        label=None if kind in drawn else kind)
                drawn.add(kind)
                left += n / r["n"]
        ax.text(left + 0.01, y, f"{r['successes']}/{r['n']}", va="center", fontsize=7,
                color="black")
    ax.set_yticks(range(len(rows)), [short(t, 36) + (f" · {names[p]}" if len(policies) > 1 else "")
                                      for t, p in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of clean attempts")
    more = (f" (first {len(shown)} of {len(every)} tasks; --task picks)"
            if not tasks and len(shown) < len(every) else "")
    ax.set_title(f"outcomes per task{more}")
    if drawn:  # above the bars, never over them
        fig.legend(frameon=False, fontsize=7, loc="outside upper center", ncol=3)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def posteriors_figure(records: Sequence[dict[str, Any]]):
    """Each task's Jeffreys posterior Beta(c + ½, n − c + ½), coloured by its difficulty band
    (bucket's default bands), one panel per policy."""
    from endstate.core.figures.posteriors import Posterior, posterior_figure
    from endstate.core.stats.bands import Bands, assign, band_masses, posterior

    bands = Bands()
    panels: dict[str, list[Posterior]] = {}
    for r in records:
        if not r["n"]:
            continue
        ab = posterior(r["n"], r["successes"])
        band = bands.names[assign(band_masses([ab], bands.edges)[0])]
        panels.setdefault(r["policy"], []).append(Posterior(r["task_id"], *ab, band))
    names = shorts(panels, 60)
    return posterior_figure([(names[p], ps) for p, ps in panels.items()], bands.edges,
                            bands.names)
