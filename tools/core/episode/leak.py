"""The leak guard of a training pool: a task is known by its content, not by its id or its split
label, so a benchmark task copied under a new id with `split: train` is still a benchmark task.

Two tasks are the same task when they put the agent in the same situation, ask the same thing and
reward the same way: the same domain, init, user instruction and opening, checks and gold. Their
id, split, tags, notes, difficulty, max_turns, tool allow-list and the scripted user's replies do
not count. Compared after normalising what a copy changes without changing the task: key order,
the order of the rows of each init table, of the checks and of the gold steps, whitespace runs
(collapsed, and trimmed at the ends of a string), letter case, and 2000.0 written as 2000.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from endstate.core.episode.plan import refuse
from endstate.core.records import schemas
from endstate.core.records.jsonl import Loc, read_jsonl

# The splits no policy may train on: `bench`, held out from the domains that have training tasks,
# and `ood`, the benchmark of domains with no training task at all (docs/domains.md).
HELD_OUT_SPLITS = ("bench", "ood")

_SORTED = orjson.OPT_SORT_KEYS
_CUT = b"\0"  # between the items of a task's canonical JSON: orjson writes NUL as an escape


def _normal(text: bytes) -> bytes:
    """Canonical JSON with every string's blanks collapsed and trimmed, its letters lowercased and
    2000.0 written 2000. Canonical JSON has no blank between tokens and escapes every other control
    character, so every blank is a space inside a string or a newline, tab or carriage return
    escape. Plain bytes operations: regular expressions over the 811 built-in tasks cost 5x more."""
    text = text.replace(b"\\n", b" ").replace(b"\\t", b" ").replace(b"\\r", b" ")
    while b"  " in text:
        text = text.replace(b"  ", b" ")
    text = text.replace(b'" ', b'"').replace(b' "', b'"').lower()
    return text.replace(b".0,", b",").replace(b".0}", b"}").replace(b".0]", b"]")


def fingerprint(task: Mapping[str, Any]) -> str:
    """The content identity of a task (the module's docstring says what counts and what does not).
    Its parts are lists of items whose order does not matter (the rows of an init table, the checks,
    the gold steps), each item normalised, then sorted."""
    user = task.get("user") or {}
    init = task.get("init") or {}
    parts = [[task.get("domain", "")], [user.get("instruction", "")], [user.get("opening", "")]]
    for table in sorted(init):
        parts += [[table], init[table]]
    parts += [task.get("checks", []), task.get("gold", [])]
    items = iter(_normal(_CUT.join(orjson.dumps(item, option=_SORTED)
                                   for part in parts for item in part)).split(_CUT))
    blob = b"\1".join(b"\2".join(sorted(islice(items, len(part)))) for part in parts)
    return hashlib.sha256(blob).hexdigest()


def _gist(task: Mapping[str, Any]) -> bytes:
    """Domain and user instruction, normalised: equal in any two tasks with one fingerprint, and
    ~20x cheaper to compute, so only the tasks that share one are fingerprinted."""
    return _normal(orjson.dumps([task.get("domain", ""), (task.get("user") or {}).get("instruction", "")]))


Located = tuple[Loc, Mapping[str, Any]]


class ContentIndex:
    """Tasks by content: which of them a task is a copy of (same fingerprint), whatever its id."""

    def __init__(self, located: Iterable[Located]):
        self._by_gist: dict[bytes, list[Located]] = {}
        for loc, task in located:
            self._by_gist.setdefault(_gist(task), []).append((loc, task))

    def original(self, task: Mapping[str, Any]) -> Located | None:
        """The first indexed task with the content of `task`, or None."""
        same = self._by_gist.get(_gist(task))
        if same:
            mine = fingerprint(task)
            return next(((loc, t) for loc, t in same if fingerprint(t) == mine), None)
        return None


def overlapping(candidates: Iterable[Mapping[str, Any]], benchmark: Iterable[Mapping[str, Any]],
                ids: Iterable[str] = ()) -> frozenset[str]:
    """Candidate ids that are benchmark tasks, by id or by content."""
    bench = list(benchmark)
    bench_ids = {t["id"] for t in bench}
    index = ContentIndex((Loc("", 0), t) for t in bench)
    hit = {i for i in ids if i in bench_ids}
    hit |= {t["id"] for t in candidates if t["id"] in bench_ids or index.original(t)}
    return frozenset(hit)


def held_out_tasks(files: Iterable[str]) -> ContentIndex:
    """The tasks of a held-out split in `files`, by content."""
    return ContentIndex((loc, task) for path in files for loc, task in _marked(path)
                        if task.get("split") in HELD_OUT_SPLITS)


_MARKS = tuple(orjson.dumps(split) for split in HELD_OUT_SPLITS)  # b'"bench"', b'"ood"'


def _marked(path: str) -> Iterable[Located]:
    """The tasks of `path` on lines that name a held-out split: a suite is mostly training tasks,
    and parsing only these takes a third of the time. A file with such a line not yet known valid
    (records.verdicts) is read whole as every tool reads it, reporting a bad record the same way."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return read_jsonl([path], "task")  # says why it cannot be read
    if not any(m in data for m in _MARKS):
        return ()
    marked = [(n, raw) for n, raw in enumerate(data.split(b"\n"), 1) if any(m in raw for m in _MARKS)]
    known = schemas.fast_check("task")
    if not all(known(raw) for _, raw in marked):
        return read_jsonl([path], "task")
    return ((Loc(path, n), orjson.loads(raw)) for n, raw in marked)


def refuse_held_out(tasks: Iterable[Located], source: str, flag: str,
                    benchmark_files: Iterable[str]) -> None:
    """The leak guard of a training pool (bucket --tasks, grpo's pool): exit 2 when `source` holds
    tasks of a held-out split, or tasks with the content of a held-out task of `benchmark_files`
    (the built-in suites and the domain folders' own), naming each and the task it copies. A
    policy trained on its benchmark tasks makes the benchmark measure nothing; `flag` is how a user
    says they mean it."""
    tasks = list(tasks)
    held = [t for _, t in tasks if t.get("split") in HELD_OUT_SPLITS]
    per_split = ", ".join(f"{split} {n}" for split in HELD_OUT_SPLITS
                          if (n := sum(t["split"] == split for t in held)))
    refuse([f"{t['id']} ({t['split']})" for t in held],
           f"of a held-out split ({per_split}) in {source} would go into a training pool",
           f"train on the train split (`grade tasks --split train --full`), or pass {flag} if you "
           "mean to train on them")
    benchmark = held_out_tasks(benchmark_files)
    copies = [(loc, task, *original) for loc, task in tasks
              if (original := benchmark.original(task))]
    refuse([f"{task['id']} ({loc}) is {bench['split']} task {bench['id']} ({bench_loc})"
            for loc, task, bench_loc, bench in copies],
           f"in {source} have the content of a held-out task (the same domain, init, user "
           "instruction and opening, checks and gold, whatever the id, split or tags)",
           f"take them out of the pool, or pass {flag} if you mean to train on them")
