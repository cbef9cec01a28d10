"""Human formats of the metrics, compare and tally objects: aligned table and markdown. Every
number is the JSON object's, formatted (rates in percent to one decimal, USD to 4 significant
digits); the figures are in figures.py."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def usd(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def change(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"




class Markup(str):
    """Cell text that is already HTML (a marked best value): not escaped again."""


STYLES = ("table", "markdown", "html")


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], style: str = "table") -> str:
    """Aligned plain text, a markdown table or an HTML table (first column left, others
    right)."""
    if style == "html":
        def cells(tag, row):
            return "".join(f"<{tag}>{c if isinstance(c, Markup) else escape(c)}</{tag}>"
                           for c in row)
        body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
        return f"<table><thead><tr>{cells('th', headers)}</tr></thead><tbody>{body}</tbody></table>"
    if style == "markdown":
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(
            "---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
                                  for r in rows])
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


def metrics_table(report: dict[str, Any], style: str = "table") -> str:
    """With two --by fields, the first × second table (cross_table), then the list of groups;
    else the list."""
    cross = cross_table(report, style)
    listing = groups_table(report, style)
    return listing if cross is None else f"{cross}\n\n{listing}"


def groups_table(report: dict[str, Any], style: str = "table") -> str:
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
                     pct(g["pass_at_1"]), pct(g["pass_at_1_se"]), pct(g["pass_at_1_task_mean"]),
                     *(pct(g["pass_at_k"].get(k)) for k in ks),
                     *(pct(g["pass_hat_k"].get(k)) for k in ks),
                     f"{obs['count']}/{g['tasks']}", usd(g["cost"]["per_success_usd"]),
                     usd(g["cost"]["per_reliable_task_usd"])])
    return grid(headers, rows, style)


def cross_fields(report: dict[str, Any]) -> tuple[str, str] | None:
    """(first, second) when the report holds the first × second groups (two --by fields)."""
    for key, groups in report.items():
        if key.startswith("by_"):
            for group in groups.values():
                inner = [k for k in group if k.startswith("by_")]
                if inner:
                    return key[3:], inner[0][3:]
            return None
    return None


def top_kmax(report: dict[str, Any]) -> str | None:
    """The largest k of the overall group (the k of the cross table's pass@k)."""
    ks = [k for k in report["overall"]["pass_at_k"] if k != "1"]
    return ks[-1] if ks else None


def cross_table(report: dict[str, Any], style: str = "table") -> str | None:
    """The study's models × domains table: one row per value of the first --by field, per value
    of the second (and `all`) pass@1 (pooled), pass@k at the largest k and observed k/k (as a
    share of the tasks), in percent. The best of each column is bold and the second best
    underlined (markdown, html), or marked * and + (table). None without two --by fields."""
    fields = cross_fields(report)
    if fields is None:
        return None
    first, second = fields
    rows = report[f"by_{first}"]
    columns = sorted({c for g in rows.values() for c in g.get(f"by_{second}", {})})
    kmax = top_kmax(report)
    every = _all_label(row_k(rows))
    metrics = [("pass@1", lambda g: g["pass_at_1"]),
               *([(f"pass@{kmax}", lambda g: g["pass_at_k"].get(kmax))] if kmax else []),
               (every, lambda g: g["observed_all"]["fraction"])]
    headers = [first]
    values: list[list[float | None]] = [[] for _ in rows]
    for column in [*columns, "all"]:
        for name, get in metrics:
            headers.append(f"{column} {name}%")
            for i, g in enumerate(rows.values()):
                cell = g if column == "all" else g.get(f"by_{second}", {}).get(column)
                values[i].append(None if cell is None else get(cell))
    marks = rank_marks([[None if v is None else round(100 * v, 1) for v in row]
                        for row in values])  # as shown: equal figures tie
    body = [[name, *(_mark(pct(v), m, style) for v, m in zip(vals, mk))]
            for name, vals, mk in zip(rows, values, marks)]
    legend = "\n* best of the column, + second" if style == "table" else ""
    return grid(headers, body, style) + legend


def row_k(rows: dict[str, Any]) -> int | None:
    """The k of the k/k column of these groups: their common observed_all k, else None."""
    ks = {g["observed_all"]["k"] for g in rows.values()}
    return ks.pop() if len(ks) == 1 else None


def rank_marks(values: list[list[float | None]]) -> list[list[int]]:
    """Per cell: 1 for the best of its column, 2 for the second best (ties share), 0 else;
    nothing is marked in a column with fewer than two values."""
    marks = [[0] * len(row) for row in values]
    for j in range(len(values[0]) if values else 0):
        column = sorted({row[j] for row in values if row[j] is not None}, reverse=True)
        if sum(row[j] is not None for row in values) < 2:
            continue
        for i, row in enumerate(values):
            if row[j] is not None and row[j] in column[:2]:
                marks[i][j] = column.index(row[j]) + 1
    return marks


def _mark(text: str, mark: int, style: str) -> str:
    """Best (1) bold, second (2) underlined; in a plain table * and +."""
    if not mark:
        return text
    if style == "markdown":
        return f"**{text}**" if mark == 1 else f"<u>{text}</u>"
    if style == "html":
        return Markup(f"<strong>{text}</strong>" if mark == 1 else f"<u>{text}</u>")
    return text + ("*" if mark == 1 else "+")


def compare_table(report: dict[str, Any], style: str = "table") -> str:
    """The comparison (compare_rates_table), then the cost of each run per success and per
    reliable task with the % change (when either run has a cost)."""
    rates = compare_rates_table(report, style)
    costs = compare_cost_table(report, style)
    return rates if costs is None else f"{rates}\n\n{costs}"


def _compare_groups(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("overall", report), *((f"{key[3:]}={name}", g) for key, by in report.items()
                                   if key.startswith("by_") for name, g in by.items())]


def compare_cost_table(report: dict[str, Any], style: str = "table") -> str | None:
    """Per group: USD per successful attempt and per reliable task (k/k) of BASE and NEW, and
    the % change of each (the study's cost table). None when neither run has a cost."""
    groups = _compare_groups(report)
    if all(g["cost"]["base"]["total_usd"] is None and g["cost"]["new"]["total_usd"] is None
           for _, g in groups):
        return None
    headers = ["group", "$/success base", "new", "change", "$/reliable base", "new", "change"]
    rows = []
    for name, g in groups:
        c = g["cost"]
        rows.append([name, usd(c["base"]["per_success_usd"]), usd(c["new"]["per_success_usd"]),
                     change(c["per_success_change_pct"]), usd(c["base"]["per_reliable_task_usd"]),
                     usd(c["new"]["per_reliable_task_usd"]),
                     change(c["per_reliable_task_change_pct"])])
    return grid(headers, rows, style)


def compare_rates_table(report: dict[str, Any], style: str = "table") -> str:
    """One row per group: pooled pass@1, pass@k and k/k of each run, Δ, P(new better)."""
    k, every = report["pass_at_k"]["k"], _all_label(report["observed_all"]["k"])
    headers = ["group", "tasks", "pass@1(pooled) base", "new", "Δ", "±se", f"pass@{k} base", "new",
               "Δ", f"{every} base", "new", "Δ", "P(new better)"]
    rows = []
    for name, g in _compare_groups(report):
        p1, pk, obs = g["pass_at_1"], g["pass_at_k"], g["observed_all"]
        rows.append([name, str(g["tasks"]), pct(p1["base"]), pct(p1["new"]), pct(p1["delta"]),
                     pct(p1["se"]), pct(pk["base"]), pct(pk["new"]), pct(pk["delta"]),
                     str(obs["base"]), str(obs["new"]), f"{obs['delta']:+d}",
                     "-" if g["p_new_better"] is None else f"{g['p_new_better']:.3f}"])
    return grid(headers, rows, style)




def tally_table(records: Sequence[dict[str, Any]], style: str = "table") -> str:
    """One row per (policy, task): successes / n, system errors, and the checks that failed
    most with their counts (`-` where no graded episodes were given)."""
    headers = ["policy", "task", "domain", "successes/n", "sys_err", "failed checks (count)"]
    rows = [[r["policy"], r["task_id"], r.get("domain") or "-", f"{r['successes']}/{r['n']}",
             str(r["system_errors"]),
             "-" if r["failed_checks"] is None else
             ", ".join(f"{c['id']} ({c['count']})" for c in r["failed_checks"]) or "none"]
            for r in records]
    return grid(headers, rows, style)
