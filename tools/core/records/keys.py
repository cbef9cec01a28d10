"""One clean record per key: duplicate keys in attempt files, for every reader.

A key is a clean attempt (`status: ok`): (task_id, attempt) for bucket, which judges one policy's
probes; (policy, task_id, attempt) for evalstats, which reads several policies' runs at once (a
policy is the model as recorded, a checkpoint's path included, and its prompting settings). System-error records never clash: `probe --resume`
re-runs a system error under the same key, so "system error, then ok" is the normal history of
a key. Two clean records of one key are a duplicate: an input error by default (both FILE:LINEs
named), or resolved by `--duplicates first|last`.

The default path costs one OR a record: a reader's tally keeps, per task, the bitmask of its
clean attempt numbers below WIDE (the rarer wider ones in a list) beside its count of clean
records; forked readers' masks are OR-ed where their counts merge. A task has a duplicate exactly
when it has more clean records than distinct attempt numbers (`repeated_tasks`). Only then are
the files read again, to name both lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

import click
import orjson

from endstate.core.errors import InputError
from endstate.core.records.jsonl import Loc, SkipLog, fold_jsonl, read_jsonl
from endstate.core.records.schemas import as_struct
from endstate.core.records.structs import Attempt

MODES = ("error", "first", "last")
WIDE = 1 << 12  # attempt numbers from here on are tracked in a set, not in the bitmask


def repeated_tasks(cells: Iterable[tuple[str, int, int]], wide: Iterable[tuple[str, int]]
                   ) -> list[str]:
    """Tasks with more clean records than distinct clean attempt numbers, from (task_id, bitmask
    of attempt numbers < WIDE, clean records) per tally cell (a task may have several) and the
    (task_id, attempt) of every clean record at or past WIDE."""
    cells = list(cells)
    if not wide and len({task_id for task_id, _, _ in cells}) == len(cells):  # a cell per task
        return sorted(task_id for task_id, mask, n in cells if mask.bit_count() != n)
    masks: dict[str, int] = {}
    records: dict[str, int] = {}
    for task_id, mask, n in cells:
        masks[task_id] = masks.get(task_id, 0) | mask
        records[task_id] = records.get(task_id, 0) + n
    distinct_wide = Counter(task_id for task_id, _ in set(wide))
    return sorted(t for t, n in records.items() if masks[t].bit_count() + distinct_wide[t] != n)


def clean_key(record: Any) -> tuple[str, int] | None:
    """(task_id, attempt) of a clean attempt Struct; None for a system error (never a clash)."""
    return (record.task_id, record.attempt) if record.status == "ok" else None


def policy_key(model: str | None, prompting: dict[str, Any] | None) -> Hashable:
    """Who made an attempt, as one hashable value: its model (a checkpoint is its path) and its
    prompting settings, in any key order. Two attempts of one policy have equal keys."""
    if not prompting:
        return model, None
    try:
        return model, frozenset(prompting.items())
    except TypeError:  # a nested value: canonical JSON instead
        return model, orjson.dumps(prompting, option=orjson.OPT_SORT_KEYS)


def policy_clean_key(record: Any) -> tuple[Hashable, str, int] | None:
    """(policy, task_id, attempt) of a clean attempt Struct; None for a system error."""
    if record.status != "ok":
        return None
    return policy_key(record.model, record.prompting), record.task_id, record.attempt


def keep_one(records: Iterable[Any], mode: str, dropped: list,
             key_of: Callable[[Any], Any] = clean_key) -> Iterator[Any]:
    """The records with at most one per clean key (`key_of`): the first or the last read
    (`mode`); each record passed over is appended to `dropped` as (task_id, attempt). "last"
    holds the clean records to the end."""
    if mode == "first":
        seen: set[Hashable] = set()
        for r in records:
            key = key_of(r)
            if key is not None:
                if key in seen:
                    dropped.append((r.task_id, r.attempt))
                    continue
                seen.add(key)
            yield r
        return
    held: dict[Hashable, Any] = {}
    for r in records:
        key = key_of(r)
        if key is None:
            yield r
            continue
        if key in held:
            dropped.append((r.task_id, r.attempt))
            del held[key]  # re-inserted below: the last one keeps its reading order
        held[key] = r
    yield from held.values()


def fold_attempts(paths: Sequence[str], tally: Callable, merge: Callable, *, duplicates: str,
                  tool: str, skip: SkipLog | None = None, workers: int | None = None,
                  struct: type | None = None,
                  repeats: Callable[[Any], list[str]], key_of: Callable[[Any], Any] = clean_key):
    """fold_jsonl over attempt files with one record per clean key (`key_of`: clean_key, or
    policy_clean_key where several policies are read at once). `repeats(state)` lists the tasks
    with a duplicate (see `repeated_tasks`). `duplicates`: "error" (raise InputError naming both
    lines), "first" or "last" (keep that one: read in one process, in order; stderr says how
    many were dropped)."""
    dropped: list[tuple[str, int]] = []
    fold = tally
    if duplicates != "error":
        workers = 1

        def fold(records):  # noqa: F811 - the tally, behind the filter
            return tally(keep_one(records, duplicates, dropped, key_of))

    state = fold_jsonl(list(paths), "attempt", fold, merge, skip=skip, workers=workers,
                       struct=struct)
    repeated = repeats(state)
    if repeated:
        raise duplicate_error(list(paths), repeated, key_of)
    if dropped:
        click.echo(f"{tool}: {len(dropped)} duplicate clean record(s) of {len(set(dropped))} "
                   f"(task_id, attempt) key(s) passed over, the {duplicates} kept "
                   f"(first: {dropped[0][0]!r} attempt {dropped[0][1]})", err=True)
    return state


def first_repeat(paths: Sequence[str], key_of: Callable[[Any], Any] = clean_key
                 ) -> tuple[Any, Loc, Loc] | None:
    """The first clean record whose key (`key_of`) was read before, in file order, with both
    locations; None when the input cannot be read again (stdin) or holds no repeat. Lines the
    schema rejects are passed over."""
    if not paths or "-" in paths:
        return None
    first: dict[Any, Loc] = {}
    for loc, r in read_jsonl(paths, "attempt", skip=SkipLog()):
        if r.get("status") != "ok":
            continue
        record = as_struct(r, Attempt)
        key = key_of(record)
        if key in first:
            return record, first[key], loc
        first[key] = loc
    return None


def duplicate_error(paths: Sequence[str], repeated: Sequence[str],
                    key_of: Callable[[Any], Any] = clean_key) -> InputError:
    """The InputError for duplicate clean keys: both FILE:LINEs when the files can be re-read."""
    found = first_repeat(paths, key_of)
    by_policy = key_of is policy_clean_key
    what = "(policy, task_id, attempt)" if by_policy else "(task_id, attempt)"
    fix = (f"each {what} must be one clean record; remove one, or pass --duplicates first|last "
           "to keep one")
    if found is not None:
        record, a, b = found
        model = f" of model {record.model!r}" if by_policy and record.model is not None else ""
        same = " (the same model and prompting)" if by_policy else ""
        return InputError(f"{b}: duplicate attempt: task_id {record.task_id!r} attempt "
                          f"{record.attempt}{model} is already at {a}{same}; {fix}")
    return InputError(f"{'<stdin>' if '-' in paths or not paths else paths[0]}: duplicate "
                      f"attempt: task_id {repeated[0]!r} has two clean records of one attempt "
                      f"({len(repeated)} task(s) in all; read from a file to see the lines); "
                      f"{fix}")
