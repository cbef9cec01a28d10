"""`evalstats report`: a study's tables and figures on one self-contained page (HTML, or
Markdown), every number formatted from the JSON objects summary, compare and tally print, which
the page also carries (`<script type="application/json">` blocks; a fenced block in Markdown).
Images are inline PNGs (data: URIs): the page is one file that opens anywhere."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

import orjson

from endstate import __version__
from endstate.evalstats import figures as F
from endstate.evalstats import render as R

STYLE = """body{font:15px/1.45 system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;
color:#222}h2{border-top:3px solid #888;padding-top:.6em;margin-top:2em}.facts{color:#555;
font-size:13px}table{border-collapse:collapse;font-size:13px;margin:.6em 0}td,th{border:1px solid
#ccc;padding:.2em .5em;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f2f2f2}img{max-width:100%;border:1px solid #eee;margin:.6em 0}
.scroll{max-height:32em;overflow:auto}pre{font-size:12px;white-space:pre-wrap}"""


@dataclass
class Page:
    """What the page shows, as JSON objects and figures (matplotlib Figures), in order."""

    title: str
    facts: list[str]
    sections: list[tuple[str, list[Any]]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # id -> the JSON object behind a section

    def add(self, heading: str, *parts: Any) -> None:
        self.sections.append((heading, [p for p in parts if p is not None]))


@dataclass
class Table:
    """A table in the page's style: a function of (object, style) from render.py."""

    render: Any
    obj: Any


@dataclass
class Figure:
    alt: str
    figure: Any  # a matplotlib Figure


@dataclass
class Text:
    text: str


def png(figure) -> str:
    """The figure as a base64 PNG (and closed)."""
    buffer = io.BytesIO()
    F.save(figure, buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def build(metrics: dict, comparisons: list[tuple[str, str, dict]], tally: list[dict],
          arrows: list[tuple[str, str]], facts: list[str], graded: bool,
          names: dict[str, str] | None = None, tasks: Sequence[str] = ()) -> Page:
    """The page of a study: metrics (summary's object, by policy and, when the records have
    one, by domain), the comparisons (BASE, NEW, compare's object, BASE and NEW named by their
    policies), the per-task tally. `names`: policy label -> the name the page shows (the JSON
    blocks keep the labels); `tasks`: the tasks of the outcome figure. A section without data
    is left out."""
    names = names or {}
    shown, tally_shown = renamed(metrics, names), [{**r, "policy": names.get(r["policy"],
                                                                             r["policy"])}
                                                    for r in tally]
    page = Page("endstate evaluation report", facts)
    page.data["metrics"] = metrics
    cross = R.cross_fields(shown)
    if cross:
        page.add(f"{cross[0]} × {cross[1]}",
                 Text("Pooled pass@1, pass@k at the largest k and the share of tasks solved in "
                      "every attempt (k/k), in percent; the best of each column bold, the second "
                      "underlined (a 0 is never marked)."),
                 Table(R.cross_table, shown), Figure(f"{cross[0]} × {cross[1]} heatmaps",
                                                     F.cross_figure(shown, *cross)))
    by_policy = shown.get("by_policy", {})
    several = metrics["overall"].get("policies", 1) > 1
    page.add("Summary", Text("pass@1 pooled (successes / clean attempts) with its standard error "
                             "over tasks" + ("; the last row pools every policy: it has no "
                                             "pass@k, pass^k or k/k." if several else ".")),
             Table(lambda obj, style: R.groups_table(obj, style, overall=several),
                   _without_nested({"overall": shown["overall"], "by_policy": by_policy})))
    for i, (base, new, report) in enumerate(comparisons):
        page.data[f"compare-{i}"] = report
        base, new = names.get(base, base), names.get(new, new)
        page.add(f"Comparison: {base} → {new}", Table(R.compare_rates_table, report),
                 Table(R.compare_cost_table, report) if R.compare_cost_table(report) else None,
                 Figure(f"{base} → {new}", F.compare_figure(report)))
    if F.priced_points(by_policy):
        page.add("Cost vs pass@1", Figure("cost per successful attempt against pass@1",
                                          F.frontier_figure(by_policy, [
                                              (names.get(b, b), names.get(n, n))
                                              for b, n in arrows])))
    if any("by_domain" in g for g in by_policy.values()):
        page.add("By domain, per policy",
                 Figure("domain × metric heatmap", F.domains_figure(shown)))
    page.data["tally"] = tally
    where = ("the failed attempts split by the checks that failed in them, from the graded "
             "episodes given (--graded)" if graded else "attempt records carry no checks: pass "
             "the graded episodes (--graded) to split the failures by the checks that failed")
    page.add("Per-task outcomes", Text(f"Successes out of clean attempts per task; {where}."),
             Figure("outcomes per task", F.outcomes_figure(tally_shown, tasks)),
             Table(R.tally_table, tally_shown))
    page.add("Difficulty posteriors",
             Text("Each task's Jeffreys posterior Beta(c + ½, n − c + ½), coloured by the "
                  "difficulty band holding most of its mass (bucket's default bands)."),
             Figure("posteriors", F.posteriors_figure(tally_shown)))
    return page


def renamed(metrics: dict, names: dict[str, str]) -> dict:
    """The metrics object with its by_policy groups under the names the page shows."""
    if "by_policy" not in metrics:
        return metrics
    return {**metrics, "by_policy": {names.get(k, k): g for k, g in metrics["by_policy"].items()}}


def _without_nested(report: dict) -> dict:
    """The groups without their nested by_ maps (the list table shows one level)."""
    out = {"overall": report["overall"]}
    for key, groups in report.items():
        if key.startswith("by_"):
            out[key] = {name: {k: v for k, v in g.items() if not k.startswith("by_")}
                        for name, g in groups.items()}
    return out


def html(page: Page) -> str:
    parts = [(f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>'
              f"{escape(page.title)}</title><style>{STYLE}</style></head><body>"),
             f"<h1>{escape(page.title)}</h1>",
             *(f'<p class="facts">{escape(f)}</p>' for f in page.facts)]
    for heading, items in page.sections:
        parts.append(f"<h2>{escape(heading)}</h2>")
        for item in items:
            if isinstance(item, Text):
                parts.append(f"<p>{escape(item.text)}</p>")
            elif isinstance(item, Table):
                parts.append(f'<div class="scroll">{item.render(item.obj, style="html")}</div>')
            else:
                parts.append(f'<img alt="{escape(item.alt)}" '
                             f'src="data:image/png;base64,{png(item.figure)}">')
    for name, obj in page.data.items():
        parts.append(f'<script type="application/json" id="{name}">{script_json(obj)}</script>')
    parts.append(f'<p class="facts">endstate {__version__}</p></body></html>\n')
    return "\n".join(parts)


def script_json(obj: Any) -> str:
    """JSON that a <script> element holds as it is: no `<`, `>` or `&` (as \\u escapes, the
    same JSON). `</` alone was not enough: a name holding `<!--<script>` put the parser in a
    state where `</script>` no longer ends the element, and the rest of the page was lost."""
    return (orjson.dumps(obj).decode().replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))


def markdown(page: Page) -> str:
    """The page in Markdown: every name escaped (render.md_escape), the JSON in a fence no
    backtick run inside it can close."""
    parts = [f"# {page.title}", "", *(f"{R.md_escape(f)}  " for f in page.facts), ""]
    for heading, items in page.sections:
        parts += [f"## {R.md_escape(heading)}", ""]
        for item in items:
            if isinstance(item, Text):
                parts += [R.md_escape(item.text), ""]
            elif isinstance(item, Table):
                parts += [item.render(item.obj, style="markdown"), ""]
            else:
                parts += [f"![{R.md_escape(item.alt)}](data:image/png;base64,{png(item.figure)})",
                          ""]
    parts += ["## The JSON behind every number", ""]
    for name, obj in page.data.items():
        blob = orjson.dumps(obj).decode()
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", blob)), default=0))
        parts += [f"`{name}`:", "", f"{fence}json", blob, fence, ""]
    return "\n".join(parts)
