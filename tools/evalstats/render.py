"""Human formats of the metrics and compare objects: aligned table, markdown, PNG plots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _usd(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(
            "---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [headers, *rows])


def _groups(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [("overall", report["overall"])]
    for key, groups in report.items():
        if key.startswith("by_"):
            out += [(f"{key[3:]}={name}", g) for name, g in groups.items()]
    return out


def _all_label(k: int | None) -> str:
    """The observed k/k column's head, with its k (n_i when the tasks' n differ)."""
    return "k/k" if k is None else f"{k}/{k}"


def metrics_table(report: dict[str, Any], markdown: bool = False) -> str:
    """One row per group; rates in percent. pass@1 is pooled (successes / clean attempts) with
    its standard error; the task mean beside it (pass@1 and pass^1 averaged over tasks, so k = 1
    gets no column of its own); then pass@k and pass^k per k > 1, and k/k with its k."""
    overall = report["overall"]
    ks = [k for k in overall["pass_at_k"] if k != "1"]
    headers = ["group", "tasks", "attempts", "sys_err", "pass@1(pooled)%", "±se",
               "pass@1(task-mean)%", *(f"pass@{k}%" for k in ks), *(f"pass^{k}%" for k in ks),
               _all_label(overall["observed_all"]["k"]), "$/success", "$/reliable"]
    rows = []
    for name, g in _groups(report):
        obs = g["observed_all"]
        rows.append([name, str(g["tasks"]), str(g["attempts"]), str(g["system_errors"]),
                     _pct(g["pass_at_1"]), _pct(g["pass_at_1_se"]), _pct(g["pass_at_1_task_mean"]),
                     *(_pct(g["pass_at_k"].get(k)) for k in ks),
                     *(_pct(g["pass_hat_k"].get(k)) for k in ks),
                     f"{obs['count']}/{g['tasks']}", _usd(g["cost"]["per_success_usd"]),
                     _usd(g["cost"]["per_reliable_task_usd"])])
    return grid(headers, rows, markdown)


def compare_table(report: dict[str, Any], markdown: bool = False) -> str:
    """One row per group: pooled pass@1, pass@k and k/k of each run, Δ, P(new better)."""
    k, every = report["pass_at_k"]["k"], _all_label(report["observed_all"]["k"])
    headers = ["group", "tasks", "pass@1(pooled) base", "new", "Δ", "±se", f"pass@{k} base", "new",
               "Δ", f"{every} base", "new", "Δ", "P(new better)"]
    rows = []
    groups = [("overall", report), *((f"{key[3:]}={name}", g) for key, by in report.items()
                                     if key.startswith("by_") for name, g in by.items())]
    for name, g in groups:
        p1, pk, obs = g["pass_at_1"], g["pass_at_k"], g["observed_all"]
        rows.append([name, str(g["tasks"]), _pct(p1["base"]), _pct(p1["new"]), _pct(p1["delta"]),
                     _pct(p1["se"]), _pct(pk["base"]), _pct(pk["new"]), _pct(pk["delta"]),
                     str(obs["base"]), str(obs["new"]), f"{obs['delta']:+d}",
                     "-" if g["p_new_better"] is None else f"{g['p_new_better']:.3f}"])
    return grid(headers, rows, markdown)


# --- plots (matplotlib, Agg, imported only here) ------------------------------------------------------

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of (pass@1, cost) points no other point beats on both (higher pass, lower cost)."""
    return [i for i, (p, c) in enumerate(points)
            if not any((q >= p and d <= c) and (q > p or d < c) for q, d in points)]


def _heatmap(ax, rows, cols, values, labels, cmap, vmin, vmax, title):
    import numpy as np

    data = np.array([[np.nan if v is None else v for v in r] for r in values], dtype=float)
    im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    for i, r in enumerate(labels):
        for j, text in enumerate(r):
            shade = im.cmap(im.norm(data[i, j]))[:3] if not np.isnan(data[i, j]) else (1, 1, 1)
            dark = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] < 0.5
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    ax.set_title(title)
    return im


def plot_metrics(report: dict[str, Any], by_model: dict[str, Any], path: str) -> None:
    """Left: cost per successful attempt against pass@1, one point per model, Pareto frontier
    marked. Right: domain × metric heatmap."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110)
    models = [(m, g["pass_at_1"], g["cost"]["per_success_usd"]) for m, g in by_model.items()
              if g["pass_at_1"] is not None and g["cost"]["per_success_usd"] is not None]
    if models:
        pts = [(p, c) for _, p, c in models]
        front = set(pareto(pts))
        for i, (name, p, c) in enumerate(models):
            left.scatter([p], [c], s=60, color="#2f6db5" if i in front else "#9aa3ad", zorder=3)
            left.annotate(name, (p, c), textcoords="offset points", xytext=(5, 4), fontsize=8)
        frontier = sorted(pts[i] for i in front)
        left.plot([p for p, _ in frontier], [c for _, c in frontier], "--", color="#2f6db5",
                  label="Pareto frontier")
        left.legend(frameon=False)
    else:
        left.text(0.5, 0.5, "no cost data\n(cost_usd or --price)", ha="center", va="center",
                  transform=left.transAxes)
    left.set_xlabel("pass@1")
    left.set_ylabel("USD per successful attempt")
    left.set_title("cost vs pass@1 by model")
    groups = report.get("by_domain") or {"overall": report["overall"]}
    ks = list(report["overall"]["pass_at_k"])
    kmax = ks[-1] if ks else None
    cols = ["pass@1", *([f"pass@{kmax}", f"pass^{kmax}"] if kmax else []),
            _all_label(report["overall"]["observed_all"]["k"])]
    values = [[g["pass_at_1"], *([g["pass_at_k"].get(kmax), g["pass_hat_k"].get(kmax)]
                                 if kmax else []), g["observed_all"]["fraction"]]
              for g in groups.values()]
    labels = [[_pct(v) for v in r] for r in values]
    im = _heatmap(right, list(groups), cols, values, labels, "viridis", 0, 1, "by domain (%)")
    fig.colorbar(im, ax=right, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_compare(report: dict[str, Any], path: str) -> None:
    """Domain × metric heatmap of NEW - BASE, each cell labelled base → new."""
    plt = _pyplot()
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
        labels.append([f"{_pct(b)}→{_pct(n)}\n({'-' if d is None else f'{100 * d:+.1f}'})"
                       for b, n, d in cells])
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.55 * len(groups)), dpi=110)
    top = max([abs(v) for r in values for v in r if v is not None] or [0.01])
    im = _heatmap(ax, list(groups), cols, values, labels, "RdBu", -top, top,
                  "new vs base: base → new % (Δ points)")
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
