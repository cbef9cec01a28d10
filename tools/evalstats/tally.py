"""From attempt records to a mergeable tally: per (task, policy, grouping values) counts, the
coverage gate's per-key counts, and what finds duplicate keys (core.records.keys).

A policy is who made the attempt: its model as recorded (a checkpoint is its path) and its
prompting settings. Keys are (policy, task_id, attempt), so runs of several policies concatenated
are read as one campaign without renumbering."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import starmap
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from endstate.core.records.keys import WIDE, policy_key, repeated_tasks
from endstate.core.records.schemas import attribute, record_struct


class Counts(NamedTuple):
    """One task's attempts within a group."""

    attempts: int  # clean attempts (status ok): n of the estimators
    successes: int  # c of the estimators
    system_errors: int
    cost_usd: float  # summed over the priced attempts
    priced_attempts: int  # attempts with a cost (clean or not)
    unpriced_attempts: int  # attempts of a --price model without agent token counts
    priced_successes: int  # successes among the priced attempts (the cost ratios' denominator)
    seen: int  # bitmask of the clean attempt numbers (duplicate keys)


@dataclass(slots=True)
class Cell:
    """A mutable Counts: the attempts of one tally cell, added to as they are read."""

    attempts: int = 0
    successes: int = 0
    system_errors: int = 0
    cost_usd: float = 0.0
    priced_attempts: int = 0
    unpriced_attempts: int = 0
    priced_successes: int = 0
    seen: int = 0

    def add(self, other: Cell) -> None:
        self.attempts += other.attempts
        self.successes += other.successes
        self.system_errors += other.system_errors
        self.cost_usd += other.cost_usd
        self.priced_attempts += other.priced_attempts
        self.unpriced_attempts += other.unpriced_attempts
        self.priced_successes += other.priced_successes
        self.seen |= other.seen


# Every cell is read once per grouping and pickled by a forked reader: both in C.
cell_values = attrgetter(*Counts._fields)  # a Cell's values, in Counts order
_unit, _seen, _clean = itemgetter(0, 1), attrgetter("seen"), attrgetter("attempts")


@dataclass(slots=True)
class KeyCounts:
    """Per (task_id, attempt, policy key) key, for the coverage gate: its records, and its
    system errors (only keys that have one)."""

    records: dict[tuple[str, int, Any], int] = field(default_factory=dict)
    system_errors: dict[tuple[str, int, Any], int] = field(default_factory=dict)

    def add(self, other: KeyCounts) -> None:
        for mine, theirs in ((self.records, other.records),
                             (self.system_errors, other.system_errors)):
            get = mine.get
            for key, n in theirs.items():
                mine[key] = get(key, 0) + n


@dataclass
class Tally:
    """What the attempts say, keyed finely enough for every grouping asked for: a Cell per
    (task_id, policy number, *values of `fields`), `policies` numbering the policy keys
    (core.records.keys.policy_key) in reading order; the KeyCounts when the coverage gate needs
    them; the clean keys with attempt numbers >= WIDE (`wide`, as (task_id, policy number,
    attempt); the smaller ones are in each Cell's bitmask)."""

    fields: tuple[str, ...] = ()
    cells: dict[tuple, Cell] = field(default_factory=dict)
    keys: KeyCounts | None = None
    wide: list[tuple[str, int, int]] = field(default_factory=list)
    policies: dict[Any, int] = field(default_factory=dict)

    def __reduce__(self):  # as plain tuples: ~2x faster than pickling Cell by Cell
        return _tally_from_values, (self.fields, list(self.cells),
                                    list(map(cell_values, self.cells.values())), self.keys,
                                    self.wide, self.policies)

    def repeated(self) -> list[str]:
        """Tasks with two clean records of one (policy, attempt), in one cell or across its
        cells (records of one key that disagree on a --by field)."""
        cells = self.cells
        if not self.wide and len(set(map(_unit, cells))) == len(cells) and \
                sum(map(int.bit_count, map(_seen, cells.values()))) == \
                sum(map(_clean, cells.values())):
            return []  # a cell per (task, policy), a distinct attempt bit per clean record: in C
        units = repeated_tasks((((k[0], k[1]), c.seen, c.attempts) for k, c in cells.items()),
                               (((t, p), a) for t, p, a in self.wide))
        return sorted({task_id for task_id, _ in units})


def _tally_from_values(fields, keys, values, key_counts, wide, policies) -> Tally:
    return Tally(fields, dict(zip(keys, starmap(Cell, values))), key_counts, wide, policies)


_SCALAR = (str, int, float, bool, type(None))


def _hashable(value: Any) -> Any:
    """A field's value as a dict key: a list of scalars (tags) a tuple, any other list or
    object its text."""
    if isinstance(value, list) and all(isinstance(v, _SCALAR) for v in value):
        return tuple(value)
    return value if isinstance(value, _SCALAR) else str(value)


class Grid(NamedTuple):
    """The coverage gate's expected keys: these tasks × attempts 0..repeats-1."""

    task_ids: frozenset[str]
    repeats: int


def tally_fn(fields: Sequence[str], prices: Mapping[str, tuple[float, float]],
             grid: Grid | None = None):
    """A tally for fold_jsonl over attempts decoded as `tally.struct` (the attempt Struct with
    `fields` added). Prices are USD per million agent prompt/completion tokens. With a `grid`
    (the coverage gate) every key is counted, and only the records inside it are tallied."""
    fields = tuple(fields)
    struct = record_struct("attempt", fields)
    values = attrgetter(*(attribute(struct, f) for f in fields)) if fields else None

    def tally(records: Iterable[Any]) -> Tally:
        t = Tally(fields, {}, KeyCounts() if grid else None)
        _count(t, _inside(records, t.keys, grid) if grid else records, values, len(fields) == 1,
               prices)
        return t

    tally.struct = struct
    return tally


def _inside(records: Iterable[Any], keys: KeyCounts, grid: Grid) -> Iterator[Any]:
    """Count every record's key for the gate; pass on only those the grid expects."""
    key_records, key_errors = keys.records, keys.system_errors
    expected, repeats = grid
    for r in records:
        key = (r.task_id, r.attempt, policy_key(r.model, r.prompting))
        key_records[key] = key_records.get(key, 0) + 1
        if r.status != "ok":
            key_errors[key] = key_errors.get(key, 0) + 1
        if r.task_id in expected and r.attempt < repeats:
            yield r


def _count(t: Tally, records: Iterable[Any], values, single: bool, prices) -> None:
    """The hot loop: add each record to its cell (attrgetter of one name returns the value, not
    a tuple: `single`). Written for speed: local names, and the --price branch only when priced."""
    cells, wide, get, policies = t.cells, t.wide, t.cells.get, t.policies
    plain: dict[Any, int] = {}  # model -> policy number, for records without prompting settings
    seen: dict[tuple, tuple] = {}  # (model, prompting's values) -> (prompting, policy number)
    for r in records:
        tid = r.task_id
        prompting = r.prompting
        if prompting is None:  # the common case: one dict lookup
            pid = plain.get(r.model)
            if pid is None:
                pid = plain[r.model] = policies.setdefault(policy_key(r.model, None), len(policies))
        else:
            pid = _policy_number(r.model, prompting, seen, policies)
        key = (tid, pid) if values is None else (tid, pid, values(r)) if single else \
            (tid, pid, *values(r))
        try:
            cell = get(key)
        except TypeError:  # a --by field holding a list or object
            key = (tid, pid, *map(_hashable, key[2:]))
            cell = get(key)
        if cell is None:
            cell = cells[key] = Cell()
        if r.status == "ok":
            cell.attempts += 1
            cell.successes += r.reward
            a = r.attempt
            if a < WIDE:
                cell.seen |= 1 << a
            else:
                wide.append((tid, pid, a))
        else:
            cell.system_errors += 1
        if prices and r.model in prices:
            cost = priced_cost(r, prices[r.model])
            if cost is None:
                cell.unpriced_attempts += 1
                continue
        else:
            cost = r.cost_usd
            if cost is None:
                continue
        cell.cost_usd += cost
        cell.priced_attempts += 1
        if r.reward == 1:
            cell.priced_successes += 1


def _policy_number(model: Any, prompting: dict, seen: dict, policies: dict) -> int:
    """The policy number of (model, prompting), remembered in `seen` by the prompting's values
    (cheap to hash; the dicts compared make it exact)."""
    try:
        probe = (model, tuple(prompting.values()))
        hit = seen.get(probe)
    except TypeError:  # a nested value
        probe, hit = None, None
    if hit is not None and hit[0] == prompting:
        return hit[1]
    pid = policies.setdefault(policy_key(model, prompting), len(policies))
    if probe is not None:
        seen[probe] = (prompting, pid)
    return pid


def priced_cost(record: Any, price: tuple[float, float]) -> float | None:
    """USD of an attempt at `price` (per million agent prompt, completion tokens); None when it
    has no agent token counts (it is unpriced, never free)."""
    agent = record.usage.get("agent") if record.usage else None
    if agent is None:
        return None
    prompt_usd, completion_usd = price
    return (agent.prompt_tokens * prompt_usd + agent.completion_tokens * completion_usd) / 1e6


def merge(parts: list[Tally]) -> Tally:
    """One Tally of several readers' (each numbered the policies it met in its own order)."""
    out = parts[0]
    for part in parts[1:]:
        number = {pid: out.policies.setdefault(policy, len(out.policies))
                  for policy, pid in part.policies.items()}
        out.wide += [(t, number[p], a) for t, p, a in part.wide]
        for key, cell in part.cells.items():
            if number[key[1]] != key[1]:
                key = (key[0], number[key[1]], *key[2:])
            mine = out.cells.get(key)
            if mine is None:
                out.cells[key] = cell
            else:
                mine.add(cell)
        if out.keys is not None:
            out.keys.add(part.keys)
    return out
