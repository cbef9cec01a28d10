"""`evalstats report`: a study's tables and figures on one self-contained page (HTML, or
Markdown), every number formatted from the JSON objects summary, compare and tally print, which
the page also carries (`<script type="application/json">` blocks; a fenced block in Markdown).
Images are inline PNGs (data: URIs): the page is one file that opens anywhere."""

from __future__ import annotations

import base64
import io
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
          arrows: list[tuple[str, str]], facts: list[str], graded: bool) -> Page:
    """The page of a study: metrics (summary's object, by policy and, when the records have
    one, by domain), the comparisons (BASE, NEW, compare's object), the per-task tally."""
    page = Page("endstate evaluation report", facts)
    cross = R.cross_fields(metrics)
    page.data["metrics"] = metrics
    if cross:
        page.add(f"{cross[0]} × {cross[1]}",
                 Text("Pooled pass@1, pass@k at the largest k and the share of tasks solved in "
                      "every attempt (k/k), in percent; the best of each column bold, the second "
                      "underlined."),
                 Table(R.cross_table, metrics), Figure(f"{cross[0]} × {cross[1]} heatmaps",
                                                       F.cross_figure(metrics, *cross)))
    listing = {"overall": metrics["overall"],
               **{k: v for k, v in metrics.items() if k.startswith("by_policy")}}
    page.add("Summary", Text("pass@1 pooled (successes / clean attempts) with its standard error "
                             "over tasks; `overall` pools every policy."),
             Table(R.groups_table, _without_nested(listing)))
    for i, (base, new, report) in enumerate(comparisons):
        page.data[f"compare-{i}"] = report
        page.add(f"Comparison: {base} → {new}", Table(R.compare_rates_table, report),
                 Table(R.compare_cost_table, report) if R.compare_cost_table(report) else None,
                 Figure(f"{base} → {new}", F.compare_figure(report)))
    by_policy = metrics.get("by_policy", {})
    page.add("Cost vs pass@1", Figure("cost per successful attempt against pass@1",
                                      F.frontier_figure(by_policy, arrows)))
    if "by_domain" in metrics:
        page.add("By domain, all policies pooled",
                 Figure("domain × metric heatmap", F.domains_figure(metrics)))
    page.data["tally"] = tally
    where = ("the checks that failed most come from the graded episodes given (--graded)"
             if graded else "attempt records carry no checks: pass the graded episodes "
             "(--graded) to see which checks failed")
    page.add("Per-task tally", Text(f"Successes out of clean attempts per task; {where}."),
             Figure("per-task tally", F.tally_figure(tally)), Table(R.tally_table, tally))
    page.add("Difficulty posteriors",
             Text("Each task's Jeffreys posterior Beta(c + ½, n − c + ½), coloured by the "
                  "difficulty band holding most of its mass (bucket's default bands)."),
             Figure("posteriors", F.posteriors_figure(tally)))
    return page


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
        blob = orjson.dumps(obj).decode().replace("</", "<\\/")
        parts.append(f'<script type="application/json" id="{name}">{blob}</script>')
    parts.append(f'<p class="facts">endstate {__version__}</p></body></html>\n')
    return "\n".join(parts)


def markdown(page: Page) -> str:
    parts = [f"# {page.title}", "", *(f"{f}  " for f in page.facts), ""]
    for heading, items in page.sections:
        parts += [f"## {heading}", ""]
        for item in items:
            if isinstance(item, Text):
                parts += [item.text, ""]
            elif isinstance(item, Table):
                parts += [item.render(item.obj, style="markdown"), ""]
            else:
                parts += [f"![{item.alt}](data:image/png;base64,{png(item.figure)})", ""]
    parts += ["## The JSON behind every number", ""]
    for name, obj in page.data.items():
        parts += [f"`{name}`:", "", "```json", orjson.dumps(obj).decode(), "```", ""]
    return "\n".join(parts)
