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
    """Cell text that is already markup (a marked best value): not escaped again."""


MARKDOWN_SPECIAL = frozenset("\\`*_[]<>|&~")  # links, code, emphasis, HTML, table cells


def one_line(text: str) -> str:
    """A name on one line: a line break in a task, domain or policy name would end a table
    row (or a heading) and start markup of its own."""
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")


def md_escape(text: str) -> str:
    """Text that Markdown shows as it is: on one line, with each character that could start a
    link, image, code span, emphasis, raw HTML or a table cell backslash-escaped."""
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in one_line(text))


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
        def cell(c):
            return c if isinstance(c, Markup) else md_escape(c)
        lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "|".join(
            "---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])
    rows = [[one_line(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [headers, *rows])


def _groups(report: dict[str, Any], overall: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """(row name, group): the groups of one policy first, then those that pool several,
    named so (a pooled row never heads the table, and no column head comes from one)."""
    out = [("overall", report["overall"])] if overall else []
    for key, groups in report.items():
        if key.startswith("by_"):
            out += [(f"{key[3:]}={name}", g) for name, g in groups.items()]
    own = [(name, g) for name, g in out if g.get("policies", 1) < 2]
    pooled = [(f"{name} ({g['policies']} policies pooled)", g) for name, g in out
              if g.get("policies", 1) >= 2]
    return own + pooled


def _all_label(k: int | None) -> str:
    """The observed k/k column's head, with its k (n_i when the tasks' n differ)."""
    return "k/k" if k is None else f"{k}/{k}"


def shown_ks(groups: list[dict[str, Any]]) -> list[str]:
    """The k > 1 of pass@k and pass^k the groups carry, in order."""
    return sorted({k for g in groups for k in g["pass_at_k"] if k != "1"}, key=int)


def metrics_table(report: dict[str, Any], style: str = "table") -> str:
    """With two --by fields, the first × second table (cross_table), then the list of groups;
    else the list."""
    cross = cross_table(report, style)
    listing = groups_table(report, style)
    return listing if cross is None else f"{cross}\n\n{listing}"


def groups_table(report: dict[str, Any], style: str = "table", overall: bool = True) -> str:
    """One row per group (those of one policy first: _groups); rates in percent. pass@1 is
    pooled (successes / clean attempts) with its standard error; the task mean beside it
    (pass@1 and pass^1 averaged over tasks, so k = 1 gets no column of its own); then pass@k
    and pass^k per k > 1, and k/k: tasks solved in all their k attempts, of the tasks (its head
    names the k the rows share; where they differ, each cell names its own). `overall`: False
    leaves that row out (the report's single policy is its only group)."""
    groups = _groups(report, overall)
    ks = shown_ks([g for _, g in groups])
    k_all = row_k({name: g for name, g in groups if g.get("policies", 1) < 2})
    headers = ["group", "tasks", "attempts", "sys_err", "pass@1(pooled)%", "±se",
               "pass@1(task-mean)%", *(f"pass@{k}%" for k in ks), *(f"pass^{k}%" for k in ks),
               _all_label(k_all), "$/success", "$/reliable"]
    rows = []
    for name, g in groups:
        rows.append([name, str(g["tasks"]), str(g["attempts"]), str(g["system_errors"]),
                     pct(g["pass_at_1"]), pct(g["pass_at_1_se"]), pct(g["pass_at_1_task_mean"]),
                     *(pct(g["pass_at_k"].get(k)) for k in ks),
                     *(pct(g["pass_hat_k"].get(k)) for k in ks),
                     _count_cell(g, k_all), usd(g["cost"]["per_success_usd"]),
                     usd(g["cost"]["per_reliable_task_usd"])])
    return grid(headers, rows, style)


def _count_cell(g: dict[str, Any], k_all: int | None) -> str:
    """`count/tasks` solved k/k; the row's own k when the head names none."""
    obs = g["observed_all"]
    if obs["count"] is None:
        return "-"
    return f"{obs['count']}/{g['tasks']}" + ("" if k_all is not None else f" ({own_k(obs)})")


def own_k(obs: dict[str, Any]) -> str:
    """The k a group's k/k was counted at: `k=20`, or its range where its tasks' n differ."""
    return f"k={obs['k']}" if obs["k"] is not None else f"k={obs['k_min']}–{obs['k_max']}"


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


def cross_table(report: dict[str, Any], style: str = "table") -> str | None:
    """The study's models × domains table: one row per value of the first --by field, per value
    of the second (and `all`) pass@1 (pooled), pass@k at the largest k and observed k/k (as a
    share of the tasks), in percent. The best of each column is bold and the second best
    underlined (markdown, html), or marked * and + (table); a k/k column whose cells were
    counted at different k is not ranked, and each cell names its k. None without two --by
    fields."""
    fields = cross_fields(report)
    if fields is None:
        return None
    first, second = fields
    rows = report[f"by_{first}"]
    columns = sorted({c for g in rows.values() for c in g.get(f"by_{second}", {})})
    kmax = top_kmax(report)
    headers, values, cells = [first], [[] for _ in rows], [[] for _ in rows]
    for column in [*columns, "all"]:
        groups = [g if column == "all" else g.get(f"by_{second}", {}).get(column)
                  for g in rows.values()]
        k_all = row_k({str(i): g for i, g in enumerate(groups) if g is not None})
        for name, get in cross_metrics(kmax, k_all):
            headers.append(f"{column} {name}%")
            for i, g in enumerate(groups):
                v = None if g is None else get(g)
                values[i].append(None if v is None or name == "k/k" else round(100 * v, 1))
                cells[i].append(pct(v) + (f" ({own_k(g['observed_all'])})"
                                          if name == "k/k" and v is not None else ""))
    marks = rank_marks(values)  # as shown: equal figures tie
    body = [[name, *(_mark(text, m, style) for text, m in zip(texts, mk))]
            for name, texts, mk in zip(rows, cells, marks)]
    legend = "\n* best of the column, + second" if style == "table" else ""
    return grid(headers, body, style) + legend


def cross_metrics(kmax: str | None, k_all: int | None):
    """(name, group -> value) of the cross table's metrics: pass@1, pass@k at the largest k,
    and k/k ("k/k" where the groups' k differ: each cell then names its own)."""
    return [("pass@1", lambda g: g["pass_at_1"]),
            *([(f"pass@{kmax}", lambda g: g["pass_at_k"].get(kmax))] if kmax else []),
            (_all_label(k_all), lambda g: g["observed_all"]["fraction"])]


def top_kmax(report: dict[str, Any]) -> str | None:
    """The largest k > 1 any group carries (the k of the cross table's pass@k)."""
    ks = shown_ks([g for _, g in _groups(report)])
    return ks[-1] if ks else None


def row_k(rows: dict[str, Any]) -> int | None:
    """The k of the k/k column of these groups: their common observed_all k, else None."""
    ks = {g["observed_all"]["k"] for g in rows.values()}
    return ks.pop() if len(ks) == 1 else None


def rank_marks(values: list[list[float | None]]) -> list[list[int]]:
    """Per cell: 1 for the best of its column, 2 for the second best (ties share), 0 else.
    Nothing is marked in a column with fewer than two values, and a 0 is never marked: no row
    is best at solving nothing (a column of 0.0 was bold in every row)."""
    marks = [[0] * len(row) for row in values]
    for j in range(len(values[0]) if values else 0):
        shown = [row[j] for row in values if row[j] is not None]
        column = sorted({v for v in shown if v > 0}, reverse=True)
        if len(shown) < 2:
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
        return Markup(f"**{text}**" if mark == 1 else f"<u>{text}</u>")
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
    the % change of each with its 95% interval (the study's cost table), then a line per run
    whose attempts are not all priced. None when neither run has a cost."""
    groups = _compare_groups(report)
    if all(g["cost"]["base"]["total_usd"] is None and g["cost"]["new"]["total_usd"] is None
           for _, g in groups):
        return None
    ci = Markup("change [95%]")  # no name in it: nothing to escape
    headers = ["group", "$/success base", "new", ci, "$/reliable base", "new", ci]
    rows = []
    for name, g in groups:
        c = g["cost"]
        rows.append([name, usd(c["base"]["per_success_usd"]), usd(c["new"]["per_success_usd"]),
                     change_interval(c["per_success_change_pct"], c["per_success_change_ci95"]),
                     usd(c["base"]["per_reliable_task_usd"]), usd(c["new"]["per_reliable_task_usd"]),
                     change_interval(c["per_reliable_task_change_pct"],
                                     c["per_reliable_task_change_ci95"])])
    return with_notes(grid(headers, rows, style), partial_pricing(report["cost"]), style)


def change_interval(x: float | None, ci: list | None) -> str:
    """`-49.5% [-70.1, -12.0]` (an unbounded upper end is +inf), or `-` without a change; only
    numbers, so no markup to escape."""
    if x is None:
        return "-"
    if ci is None:
        return f"{change(x)} (no interval)"
    hi = "+inf" if ci[1] is None else f"{ci[1]:+.1f}"
    return Markup(f"{change(x)} [{ci[0]:+.1f}, {hi}]")


def partial_pricing(cost: dict[str, Any]) -> list[str]:
    """A line per run of which only some attempts have a cost."""
    return [f"{name.upper()}: only {c['priced_attempts']} of {c['recorded_attempts']} attempts "
            "have a cost: its ratios are the priced attempts' (docs/evalstats.md)"
            for name in ("base", "new") if 0 < (c := cost[name])["priced_attempts"]
            < c["recorded_attempts"]]


def with_notes(table: str, notes: list[str], style: str) -> str:
    """The table and a line under it per note (a paragraph each in HTML)."""
    if not notes:
        return table
    if style == "html":
        return Markup(table + "".join(f'<p class="note">{escape(n)}</p>' for n in notes))
    return "\n".join([table, *(md_escape(n) if style == "markdown" else n for n in notes)])


def compare_rates_table(report: dict[str, Any], style: str = "table") -> str:
    """One row per group: pooled pass@1, pass@k and k/k of each run, Δ, P(new better). k/k is
    at the common k; a run with more attempts counts pass^k there (said under the table)."""
    k, obs = report["pass_at_k"]["k"], report["observed_all"]
    headers = ["group", "tasks", "pass@1(pooled) base", "new", "Δ", "±se", f"pass@{k} base",
               "new", "Δ", f"{_all_label(obs['k'])} base", "new", "Δ", "P(new better)"]
    rows = []
    for name, g in _compare_groups(report):
        p1, pk, every = g["pass_at_1"], g["pass_at_k"], g["observed_all"]
        rows.append([name, str(g["tasks"]), pct(p1["base"]), pct(p1["new"]), pct(p1["delta"]),
                     pct(p1["se"]), pct(pk["base"]), pct(pk["new"]), pct(pk["delta"]),
                     _tasks(every["base"]), _tasks(every["new"]), _tasks(every["delta"], "+"),
                     "-" if g["p_new_better"] is None else f"{g['p_new_better']:.3f}"])
    notes = [(f"k/k at k = {obs['k']}: {' and '.join(n.upper() for n in obs['estimated'])} "
              f"ran more attempts per task; counted as pass^{obs['k']} over them (the expected "
              f"tasks solved in {obs['k']} of its attempts)")] if obs.get("estimated") else []
    return with_notes(grid(headers, rows, style), notes, style)


def _tasks(x: float, sign: str = "") -> str:
    """A count of tasks: an integer, or an expected count to one decimal."""
    return f"{x:{sign}d}" if isinstance(x, int) else f"{x:{sign}.1f}"


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
