"""`grade show`: episodes as transcripts for people, in the terminal (rich), as Markdown or as HTML.

Reads graded episodes (what `grade` writes) or plain episodes (no verdicts then). Each turn is
shown with its role; tool calls with their arguments, tool results cut at --max-chars. A graded
episode ends with its reward and every check's verdict, and each failed check is also shown at
the turn it concerns:

- `row`, `absent`, `count`: after the last tool call that changed a row the check's `where`
  picks (as far as the diff shows that row), else the last call that changed the check's table;
- `only_changes`, `gold_state`: after the last tool call that changed the database;
- `said`: after the agent's last message with text;
- `sql`, `python`, `judge` (and a check whose table no call changed): at the end.

Which call changed what is measured, not guessed: the episode's calls run again, in order, on a
fresh sandbox of its task, and that run must end in the episode's recorded diff; when it does not
(another domain version) or the task is unknown, table checks are shown at the end, with a note
saying why. Only failed table checks pay for this; the verdicts themselves are the recorded ones.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import click
import orjson

from endstate.core.cli import ranges
from endstate.core.cli.command import common_options
from endstate.core.console import stdio
from endstate.core.env.changes import Changes
from endstate.core.env.domain import Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.plan import TaskFilter
from endstate.core.errors import EndstateError
from endstate.core.grading import match
from endstate.core.grading.grader import TaskIndex, check_id, guarded
from endstate.core.records import schemas
from endstate.core.records.jsonl import Loc, SkipLog, fail, read_jsonl
from endstate.grade import show_render
from endstate.grade.show_render import Transcript, Turn

BY_TABLE = ("row", "absent", "count")  # checks that name a table (and a `where`)
BY_LAST_WRITE = ("only_changes", "gold_state")  # checks about every change
FORMATS = ("terminal", "markdown", "html")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline


def printable(text: str) -> str:
    """Control characters as escapes (ESC as `\\x1b`): what a model wrote must not drive the
    terminal it is read in (colours, cursor, window title, clipboard)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def clip(text: str, max_chars: int) -> str:
    """`text` cut after max_chars (0: never), its control characters shown (printable)."""
    if max_chars and len(text) > max_chars:
        text = text[:max_chars] + f" … [+{len(text) - max_chars:,} chars]"
    return printable(text)


def signature(function: dict[str, Any]) -> str:
    """`name(key=value, ...)` with JSON values; the raw arguments when they are no JSON object."""
    try:
        args = orjson.loads(function["arguments"])
    except orjson.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        return f"{function['name']}({function['arguments']})"
    return f"{function['name']}(" + ", ".join(
        f"{k}={orjson.dumps(v).decode()}" for k, v in args.items()) + ")"


def turns_of(messages: list[dict[str, Any]], max_chars: int) -> list[Turn]:
    turns = []
    for m in messages:
        text = m.get("content") or ""
        turns.append(Turn(
            role=m["role"], text=clip(text, max_chars), reasoning=clip(m.get("reasoning") or "", max_chars),
            calls=[clip(signature(c["function"]), max_chars) for c in m.get("tool_calls") or ()],
            tool=printable(m.get("name", "")) if m["role"] == "tool" else "",
            error=m["role"] == "tool" and text.startswith('{"error"'),
            parse_error=printable(m.get("parse_error") or "")))
    return turns


def facts_of(episode: dict[str, Any]) -> list[str]:
    policy = episode.get("policy") or {}
    facts = [episode["episode_id"], f"domain {episode['domain']}",
             f"model {policy.get('model', '?')} ({policy.get('backend', '?')})",
             f"status {episode['status']}", f"termination {episode.get('termination')}"]
    if episode.get("error"):
        facts.append(f"error {episode['error']['kind']}: {episode['error']['message']}")
    return [printable(fact) for fact in facts]


# -- where each failed check goes ------------------------------------------------------------------

Effects = list[tuple[int, list[tuple[str, dict[str, Any]]]]]  # (message index, rows a call changed)


def _rows(changes: Changes) -> dict[tuple[str, bytes], tuple[str, dict[str, Any]]]:
    """(table, key) -> (inserted|deleted|updated, what the diff shows of the row: its key and its
    new, or deleted, values)."""
    rows = {}
    for table, entry in changes.items():
        for kind in ("inserted", "deleted", "updated"):
            for e in entry.get(kind, []):
                key = orjson.dumps(e["key"], option=orjson.OPT_SORT_KEYS)
                rows[table, key] = (kind, {**(e.get("row") or {}), **e.get("after", {}), **e["key"]})
    return rows


def call_effects(domains: Domains, task: dict[str, Any], episode: dict[str, Any]) -> Effects | None:
    """Per tool call, in order: the message index of its result and the rows it changed, found by
    running the episode's calls again on a fresh sandbox. None when that run does not end in the
    recorded diff: then it says nothing about the recorded episode."""
    effects: Effects = []
    with Sandbox(domains[task["domain"]], task.get("init"), task.get("tools")) as sandbox:
        for i, m in enumerate(episode["messages"]):
            for call in m.get("tool_calls") or ():
                try:
                    args = orjson.loads(call["function"]["arguments"])
                except orjson.JSONDecodeError:
                    args = None
                before = _rows(sandbox.changes())
                sandbox.call(call["function"]["name"], args)
                after = _rows(sandbox.changes())
                changed = [(t, row) for (t, key), (kind, row) in after.items()
                           if before.get((t, key)) != (kind, row)]
                changed += [(t, row) for (t, key), (_, row) in before.items() if (t, key) not in after]
                effects.append((_result_index(episode["messages"], i, call["id"]), changed))
        return effects if _rows(sandbox.changes()) == _rows(episode["changes"]) else None


def _result_index(messages: list[dict[str, Any]], i: int, call_id: str) -> int:
    """The message holding the result of the call `call_id` made in message i (else i itself)."""
    return next((j for j in range(i + 1, len(messages))
                 if messages[j]["role"] == "tool" and messages[j].get("tool_call_id") == call_id), i)


def _last(effects: Effects, wanted: Callable[[str, dict[str, Any]], bool]) -> int | None:
    return next((i for i, rows in reversed(effects) if any(wanted(t, r) for t, r in rows)), None)


def table_anchor(check: dict[str, Any], effects: Effects) -> int | None:
    """Where a failed check that names a table goes: the last call that changed a row its `where`
    picks, else the last call that changed its table; None when no call changed it."""
    table, where = check["table"], check.get("where") or {}
    picked = _last(effects, lambda t, row: t == table and where and all(
        c in row and match.matches(test, row[c]) for c, test in where.items()))
    return picked if picked is not None else _last(effects, lambda t, _: t == table)


class Placer:
    """Places an episode's failed checks at turns. Loads the task definitions only when a failed
    check needs them (a table check), and the sandbox run only then too."""

    def __init__(self, domains: Domains, task_files: tuple[str, ...]):
        self.domains, self.task_files = domains, task_files
        self._tasks: TaskIndex | None = None

    def task(self, task_id: str) -> dict[str, Any] | None:
        if self._tasks is None:
            self._tasks = TaskIndex(self.domains, self.task_files)
        return self._tasks.get(task_id)

    def place(self, episode: dict[str, Any], t: Transcript) -> None:
        failed = [c for c in t.checks if c["passed"] is False]
        by_table = [c for c in failed if c["kind"] in BY_TABLE + BY_LAST_WRITE]
        definitions, effects = self._definitions_and_effects(episode, t) if by_table else ({}, None)
        said_at = next((i for i in reversed(range(len(t.turns)))
                        if t.turns[i].role == "assistant" and t.turns[i].text.strip()), None)
        for check in failed:
            at = None
            if check["kind"] == "said":
                at = said_at
            elif effects is not None and check["kind"] in BY_LAST_WRITE:
                at = _last(effects, lambda *_: True)
            elif effects is not None and check["id"] in definitions and check["kind"] in BY_TABLE:
                at = table_anchor(definitions[check["id"]], effects)
            (t.turns[at].checks if at is not None else t.at_end).append(check)

    def _definitions_and_effects(self, episode: dict[str, Any], t: Transcript):
        suites = " or ".join(self.task_files) or "the built-in suites"
        task = self.task(episode["task_id"])
        if task is None:
            t.notes.append(f"task {episode['task_id']} is not in {suites} (pass --tasks FILE): "
                           "failed table checks are shown at the end")
            return {}, None
        definitions = {check_id(c, i): c for i, c in enumerate(guarded(task))}
        try:
            effects = call_effects(self.domains, task, episode)
        except EndstateError as e:
            t.notes.append(f"cannot run the calls again ({e.message}): failed table checks are "
                           "shown at the end")
            return definitions, None
        if effects is None:
            t.notes.append("the calls run again do not end in the recorded diff (task or domain "
                           "changed since?): failed table checks are shown at the end")
        return definitions, effects


def transcript(episode: dict[str, Any], placer: Placer, max_chars: int) -> Transcript:
    graded = "checks" in episode and "reward" in episode
    title = f"{episode['task_id']} · attempt {episode['attempt']}"
    t = Transcript(title=title, facts=facts_of(episode), turns=turns_of(episode["messages"], max_chars),
                   graded=graded, reward=episode.get("reward"))
    if graded:  # a plain episode's `checks`, if any, are no verdicts
        t.checks = [{**c, "detail": printable(c["detail"])} for c in episode["checks"]]
        placer.place(episode, t)
    return t


def checked(records: Iterator[tuple[Loc, dict[str, Any]]], skip: SkipLog | None):
    """Episode records, and those with a reward checked as graded episodes too."""
    for loc, record in records:
        problem = schemas.problem("graded_episode", record) if "reward" in record else None
        if problem:
            fail(loc, problem, skip)
            continue
        yield loc, record


@click.command("show")
@click.argument("episodes", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--task", "task_ids", multiple=True, metavar="ID",
              help="Only episodes of tasks whose id matches this shell-style pattern (repeatable: any of).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True,
              help="terminal: coloured on a terminal, plain text in a pipe; markdown; html: one "
                   "self-contained page.")
@click.option("--max-chars", type=ranges.count(0, 10**9), default=800, show_default=True,
              help="Cut each message, call and result after this many characters (0: never).")
@click.option("--tasks", "task_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Task definitions (JSONL, repeatable), to place failed table checks at the call "
                   "they concern. Default: the built-in suites.")
@common_options(domains=True, skip_invalid=True)
def show(episodes, task_ids, fmt, max_chars, task_files, domains, skip):
    """Show episodes as transcripts for people: each turn, tool calls with their arguments, tool
    results, and for graded episodes the reward, every check's verdict, and each failed check at
    the turn it concerns. Reads graded or plain episodes from EPISODES files or stdin (`-`).

    \b
    Example:
      grade show graded.jsonl --task 'retail-cancel-*'
      rollout tasks/bench/retail.jsonl | grade | grade show - --format markdown > episodes.md
      grade show graded.jsonl --format html > episodes.html
    """
    select = TaskFilter(ids=task_ids)
    placer = Placer(domains, task_files)
    out = stdio.records_out()
    color = fmt == "terminal" and out.isatty()
    render = show_render.formats(color, shutil.get_terminal_size().columns if color else 100)[fmt]
    shown = 0
    out.write(render.start().encode())
    for _, episode in checked(read_jsonl(list(episodes), "episode", skip=skip), skip):
        if select.takes_id(episode["task_id"]):
            out.write(render.episode(transcript(episode, placer, max_chars)).encode())
            out.flush()
            shown += 1
    out.write(render.end.encode())
    out.flush()
    if select.active and not shown:
        raise EndstateError(f"{select.describe()} selects no episode in "
                            f"{', '.join(episodes) or 'stdin'}")
