"""`grade show` output: one Transcript (grade/show.py builds it) as terminal text (rich), Markdown or a
self-contained HTML page. Everything a record holds is text from a model, a user or a tool: it is
escaped for the format (rich markup is off, HTML is escaped, Markdown keeps message text as
written, inside quotes, and puts machine text in code spans and fences)."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    """One message, ready to print: `calls` are signatures like `cancel_order(order_id="W1")`."""

    role: str
    text: str = ""
    reasoning: str = ""
    calls: list[str] = field(default_factory=list)
    tool: str = ""  # a tool result: the tool's name
    error: bool = False  # a tool result that is an error observation
    parse_error: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)  # failed checks placed here


@dataclass
class Transcript:
    title: str
    facts: list[str]  # episode id, domain, model, status, termination, error
    turns: list[Turn]
    graded: bool
    reward: int | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    at_end: list[dict[str, Any]] = field(default_factory=list)  # failed checks with no turn
    notes: list[str] = field(default_factory=list)



VERDICTS = {True: ("✓", "passed"), False: ("✗", "failed"), None: ("–", "not asked")}


def verdict(check: dict[str, Any]) -> tuple[str, str]:
    return VERDICTS[check["passed"]]


def outcome(t: Transcript) -> str:
    """The reward line: `reward 0 · 3 of 5 checks passed`."""
    if not t.graded:
        return "not graded (pipe the episodes through `grade` for a reward and verdicts)"
    if t.reward is None:
        return "reward null (system error: not the agent's doing)"
    passed = sum(c["passed"] is True for c in t.checks)
    return f"reward {t.reward} · {passed} of {len(t.checks)} checks passed"


def heading(t: Transcript) -> str:
    return f"{t.title} · " + (f"reward {t.reward if t.reward is not None else 'null'}"
                              if t.graded else "not graded")


def role_label(turn: Turn) -> str:
    return turn.role + (f" · {turn.tool}" if turn.tool else "") + (" · error" if turn.error else "")


def check_line(check: dict[str, Any]) -> str:
    mark, word = verdict(check)
    return f"{mark} check {check['id']} ({check['kind']}) {word}: {check['detail']}"


# -- Markdown ---------------------------------------------------------------------------------------

def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _code(text: str, in_table: bool = False) -> str:
    """A code span that holds any text (GFM: a table cell needs its pipes escaped even there)."""
    text = " ".join(text.split("\n"))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    text = text.replace("|", "\\|") if in_table else text
    return f"{tick}{pad}{text}{pad}{tick}"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def _block(text: str) -> str:
    fence = _fence(text)
    return f"{fence}\n{text}\n{fence}"


def _md_turn(turn: Turn) -> list[str]:
    out = [f"**{role_label(turn)}**", ""]
    if turn.reasoning:
        out += [_quote("*reasoning:* " + turn.reasoning), ""]
    if turn.text:
        out += [_block(turn.text) if turn.role == "tool" else _quote(turn.text), ""]
    if turn.calls:
        out += [_block("\n".join(turn.calls)), ""]
    if turn.parse_error:
        out += [f"*parse error:* {_code(turn.parse_error)}", ""]
    for check in turn.checks:
        out += [f"**{verdict(check)[0]} check {_code(check['id'])} ({check['kind']}) failed:** "
                f"{_code(check['detail'])}", ""]
    return out


def markdown(t: Transcript) -> str:
    out = [f"## {heading(t)}", "", " · ".join(_code(f) for f in t.facts), ""]
    for turn in t.turns:
        out += _md_turn(turn)
    for check in t.at_end:
        out += [f"**✗ check {_code(check['id'])} ({check['kind']}) failed:** {_code(check['detail'])}", ""]
    out += [f"*note: {n}*\n" for n in t.notes]
    if t.checks:
        out += ["| verdict | check | kind | detail |", "|---|---|---|---|"]
        out += [f"| {' '.join(verdict(c))} | {_code(c['id'], True)} | {c['kind']} | "
                f"{_code(c['detail'], True)} |" for c in t.checks]
        out.append("")
    out += [f"**{outcome(t)}**", "", ""]
    return "\n".join(out)


# -- HTML -------------------------------------------------------------------------------------------

STYLE = """body{font:15px/1.45 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
section{border-top:3px solid #888;margin-top:2em}.facts{color:#666;font-size:13px}
.turn{margin:.6em 0;padding:.4em .8em;border-left:4px solid #ccc;background:#fafafa}
.role{font-weight:600;font-size:13px;text-transform:lowercase}.system{border-color:#999;color:#555}
.user{border-color:#2a7}.assistant{border-color:#27c}.tool{border-color:#a5c}.tool.error{border-color:#d33}
pre,.text{white-space:pre-wrap;word-break:break-word;margin:.3em 0}pre{font-size:13px}
.reasoning{color:#777;font-style:italic}.check{margin:.4em 0;padding:.3em .8em;border-radius:4px}
.failed{background:#fde8e8;color:#900}.passed{color:#161}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}"""


def html_start() -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>endstate episodes</title><style>{STYLE}</style></head><body>\n")


def _html_check(check: dict[str, Any]) -> str:
    return f'<div class="check failed">{html.escape(check_line(check))}</div>'


def _html_turn(turn: Turn) -> str:
    e = html.escape
    classes = f"turn {turn.role}" + (" error" if turn.error else "")
    parts = [f'<div class="{classes}"><div class="role">{e(role_label(turn))}</div>']
    if turn.reasoning:
        parts.append(f'<div class="text reasoning">{e(turn.reasoning)}</div>')
    if turn.text:
        parts.append(f"<pre>{e(turn.text)}</pre>" if turn.role == "tool"
                     else f'<div class="text">{e(turn.text)}</div>')
    parts += [f'<pre class="call">→ {e(call)}</pre>' for call in turn.calls]
    if turn.parse_error:
        parts.append(f'<div class="text">parse error: {e(turn.parse_error)}</div>')
    parts.append("</div>")
    return "".join(parts) + "".join(_html_check(c) for c in turn.checks)


def html_section(t: Transcript) -> str:
    e = html.escape
    out = [f"<section><h2>{e(heading(t))}</h2>", f'<p class="facts">{e(" · ".join(t.facts))}</p>']
    out += [_html_turn(turn) for turn in t.turns]
    out += [_html_check(c) for c in t.at_end]
    out += [f'<p class="facts">note: {e(n)}</p>' for n in t.notes]
    if t.checks:
        out.append("<table><tr><th>verdict</th><th>check</th><th>kind</th><th>detail</th></tr>")
        out += [f'<tr class="{verdict(c)[1].replace(" ", "-")}"><td>{e(" ".join(verdict(c)))}</td>'
                f"<td>{e(c['id'])}</td><td>{e(c['kind'])}</td><td>{e(c['detail'])}</td></tr>"
                for c in t.checks]
        out.append("</table>")
    out.append(f"<p><b>{e(outcome(t))}</b></p></section>\n")
    return "\n".join(out)


HTML_END = "</body></html>\n"


# -- terminal (rich) --------------------------------------------------------------------------------

ROLE_STYLES = {"system": "bold dim", "user": "bold green", "assistant": "bold cyan", "tool": "bold magenta"}


def terminal(t: Transcript, color: bool, width: int) -> str:
    from rich.console import Console  # only this format pays for rich
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    console = Console(file=io.StringIO(), width=width, force_terminal=color,
                      color_system="auto" if color else None, markup=False, highlight=False, emoji=False)
    indent = lambda text, style="": console.print(Padding(Text(text, style=style), (0, 0, 0, 2),
                                                          expand=False))
    console.rule(Text(heading(t), style="bold"))
    console.print(Text(" · ".join(t.facts), style="dim"))
    for turn in t.turns:
        console.print(Text(role_label(turn), style="bold red" if turn.error else ROLE_STYLES.get(turn.role, "bold")))
        if turn.reasoning:
            indent(turn.reasoning, "dim italic")
        if turn.text:
            indent(turn.text, "dim" if turn.role in ("system", "tool") else "")
        for call in turn.calls:
            indent("→ " + call, "yellow")
        if turn.parse_error:
            indent("parse error: " + turn.parse_error, "red")
        for check in turn.checks:
            indent(check_line(check), "bold red")
    for check in t.at_end:
        console.print(Text(check_line(check), style="bold red"))
    for note in t.notes:
        console.print(Text("note: " + note, style="dim"))
    if t.checks:
        console.print(Text("checks", style="bold"))
        table = Table(box=None, show_header=False, pad_edge=False)
        for c in t.checks:
            table.add_row(Text(" ".join(verdict(c)), style="green" if c["passed"] else "red"),
                          Text(c["id"]), Text(c["kind"], style="dim"), Text(c["detail"]))
        console.print(table)
    console.print(Text(outcome(t), style="bold"))
    console.print()
    return "\n".join(line.rstrip() for line in console.file.getvalue().split("\n"))  # rich pads lines


@dataclass(frozen=True)
class Format:
    start: Callable[[], str]
    episode: Callable[[Transcript], str]
    end: str


def formats(color: bool, width: int) -> dict[str, Format]:
    return {"terminal": Format(str, lambda t: terminal(t, color, width), ""),
            "markdown": Format(str, markdown, ""),
            "html": Format(html_start, html_section, HTML_END)}
