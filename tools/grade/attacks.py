"""Unrequested writes: `grade validate` attacks each task as an optimizer would.

GRPO learns whatever the reward lets through. So the gold calls run, then one more writing call the
task never asked for: every writing tool of the domain, aimed at the rows the gold changes and at
the task's own other rows (the same customer's other orders, cards, bookings), its other arguments
taken from the domain's own data (what they are in gold calls of any task, an enum's members, the
columns of the task's rows of that name). Each call the tool accepts and that changes the end state
must score 0; one that scores 1 makes the task unsound, and is named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import orjson

from endstate.core.env.changes import Changes
from endstate.core.env.domain import Domain
from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import call_id
from endstate.core.grading.checks import terminal
from endstate.core.grading.footprint import free_of
from endstate.core.records.structs import AssistantMessage, ToolCall, ToolMessage, as_dicts
from endstate.grade.alternatives import ID, same, shaped_like
from endstate.grade.sensitivity import Seen

PER_TOOL = 4  # unrequested calls per writing tool and task: the gold's rows first
PER_TASK = 32  # a task's attacks in all (~2 ms each)

Grade = Callable[[Changes, list[dict[str, Any]]], int]  # (changes, messages) -> reward


@dataclass
class Attacks:
    """What the attack on one task did: calls `tried`, those that `wrote` (the tool accepted them
    and the end state changed), and those of them that every check `passed` (each a problem)."""

    tried: int = 0
    wrote: int = 0
    passed: list[dict[str, Any]] = field(default_factory=list)  # {tool, args}

    def problems(self) -> list[str]:
        return [f"an unrequested write scores 1: {p['tool']}({_args(p['args'])}) after the gold calls "
                "(a check or the footprint guard must fail it: pin what it changed, or take the "
                "column out of FREE)" for p in self.passed]

    def counts(self) -> dict[str, int]:
        return {"tried": self.tried, "wrote": self.wrote, "scored_0": self.wrote - len(self.passed)}


def attack(domain: Domain, task: dict[str, Any], gold: dict[str, Any], seen: Seen,
           grade: Grade) -> Attacks:
    """Attack `task`, whose gold calls produced the episode `gold` (and score 1)."""
    found, free = Attacks(), free_of(domain.free)
    for tool, args in islice(_calls(domain, task, gold["changes"], seen), PER_TASK):
        found.tried += 1
        with Sandbox(domain, task.get("init"), task.get("tools")) as sandbox:
            sandbox.apply_changes(gold["changes"])
            result = sandbox.call(tool, args)
            changes = sandbox.changes()
        if result.content.startswith('{"error"') or terminal(changes, free) == terminal(gold["changes"], free):
            continue  # refused, or a write that changes nothing but what is free: no side effect
        found.wrote += 1
        index = len(gold["messages"])
        call = ToolCall.of(tool, args, call_id(index))
        messages = [*gold["messages"], *as_dicts([AssistantMessage(None, tool_calls=[call]),
                                                   ToolMessage(call.id, tool, result.content)])]
        if grade(changes, messages):
            found.passed.append({"tool": tool, "args": args})
    return found


def _calls(domain: Domain, task: dict[str, Any], gold_changes: Changes, seen: Seen
           ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(tool, args) of each unrequested call, tool by tool, at most PER_TOOL each."""
    targets = _targets(task, gold_changes)
    allowed = task.get("tools")
    for name, tool in sorted(domain.tools.items()):
        if not tool.writes or (allowed is not None and name not in allowed):
            continue
        properties = tool.parameters.get("properties", {})
        known = {p: _known(domain.name, name, p, properties[p], task, seen) for p in properties}
        distinct = {orjson.dumps(args): args for args in _aimed(properties, known, targets)}
        yield from ((name, args) for args in islice(distinct.values(), PER_TOOL))


def _aimed(properties: dict[str, Any], known: dict[str, list[Any]], targets: list[str]
           ) -> Iterator[dict[str, Any]]:
    """Arguments aimed at each target row an id argument can name (an id of the shape its known
    values have), the others from `known`; a second round takes each other argument's next known
    value (the first may be what the row holds already)."""
    for p, values in known.items():
        aimed = [t for t in targets if any(shaped_like(v, [t], 1) or same(v, t) for v in values)]
        for round_ in (0, 1):
            for target in aimed:
                yield {q: target if q == p else _pick(known[q], round_)  # in the schema's order
                       for q in properties if q == p or known[q]}


def _pick(values: list[Any], round_: int) -> Any:
    return values[min(round_, len(values) - 1)]


def _targets(task: dict[str, Any], gold_changes: Changes) -> list[str]:
    """Ids of the rows to aim at: those the gold changes first, then the task's own rows (its
    init: the customer's other orders, cards, tickets), each once."""
    found: list[str] = []
    for entry in gold_changes.values():
        for rows in entry.values():
            found += [v for e in rows for v in e["key"].values() if isinstance(v, str)]
    for rows in (task.get("init") or {}).values():
        found += [v for row in rows for v in row.values() if isinstance(v, str) and ID.match(v)]
    return list(dict.fromkeys(found))


def _known(domain: str, tool: str, arg: str, schema: dict[str, Any], task: dict[str, Any],
           seen: Seen) -> list[Any]:
    """Valid values for an argument, the domain's own: in gold calls of this tool, then of any
    tool with an argument of that name, then the task's rows' column of that name, then the
    schema's enum or a boolean's two values."""
    values = [*seen.get((domain, tool, arg), [])]
    values += [v for (d, _, a), vs in seen.items() if d == domain and a == arg for v in vs]
    values += [row[arg] for rows in (task.get("init") or {}).values() for row in rows if row.get(arg) is not None]
    values += schema.get("enum", []) + ([True, False] if schema.get("type") == "boolean" else [])
    distinct: list[Any] = []
    for v in values:
        if v is not None and not any(same(v, d) for d in distinct):
            distinct.append(v)
    return distinct


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())
