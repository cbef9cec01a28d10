"""From a tally to per-task counts of each group: `overall`, and one map per --by FIELD.

A task's group under a task property (domain, template, tags, split, or any field of the --tasks
records) is one value: the task record's when --tasks is given, else the first non-null value
of its attempts; attempts that disagree are an input error. A list value (tags) puts the task
in one group per item, so those groups overlap. Other fields (model, ...) are properties of the
attempt: one task can count in several of their groups. `policy` is the policy's label (its
model, and the prompting settings that tell two policies of one model apart). `overall` is every
task's attempts, whatever the --by fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import add, itemgetter
from typing import Any

from endstate.evalstats.tally import Counts, Tally, _hashable, cell_values

MISSING = "(none)"  # the group of tasks without a value of a --by field
TASK_FIELDS = ("domain", "template", "tags", "split")
POLICY = "policy"  # --by policy: not a record field, the policy of each attempt (tally.py)

_new_counts = tuple.__new__  # Counts(...) without its Python-level __new__


class TaskCounts(dict):
    """task_id -> its attempts (Counts) in one group; `policies`: the numbers of the policies
    whose attempts it holds (a group of several pools them: per task, their attempts are one
    sample of no policy)."""

    __slots__ = ("policies",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.policies: set[int] = set()


class FieldConflict(ValueError):
    def __init__(self, task_id: str, name: str, first: Any, other: Any):
        super().__init__(f"task {task_id!r} has {name} {first!r} in some attempts and {other!r} "
                         f"in others; a task's {name} is one value: fix the attempts, or pass "
                         f"--tasks FILE to take it from the task records")


class FieldAbsent(ValueError):
    def __init__(self, name: str, with_tasks: bool):
        where = "attempt or task record" if with_tasks else "attempt record"
        super().__init__(f"--by {name}: no {where} has a field {name!r}; name a field the "
                         f"records carry (e.g. domain, model)"
                         + ("" if with_tasks else ", or pass --tasks FILE for a task field"))


def is_task_field(name: str, tasks: Mapping[str, Mapping[str, Any]] | None) -> bool:
    return name in TASK_FIELDS or bool(tasks) and any(name in t for t in tasks.values())


def _index(t: Tally, name: str) -> int:
    """Where field `name`'s value sits in a tally cell's key (task_id, policy, *values)."""
    return t.fields.index(name) + 2


def policy_labels(t: Tally) -> dict[int, str]:
    """Policy number -> its label: the model (MISSING without one), and where one model was run
    with several prompting settings, the settings that differ, e.g. `m [few_shot=False]`."""
    settings = {pid: _settings(prompting) for (_, prompting), pid in t.policies.items()}
    models = {pid: model for (model, _), pid in t.policies.items()}
    labels = {}
    for pid, model in models.items():
        peers = [settings[q] for q, m in models.items() if m == model]
        differ = sorted({k for peer in peers for k in {*peer, *settings[pid]}
                         if peer.get(k) != settings[pid].get(k)})
        name = MISSING if model is None else str(model)
        labels[pid] = name + (" [" + ", ".join(f"{k}={settings[pid].get(k)}" for k in differ)
                              + "]" if differ else "")
    return labels


def _settings(prompting: Any) -> dict[str, Any]:
    if prompting is None:
        return {}
    if isinstance(prompting, bytes):  # canonical JSON (a nested value)
        import orjson

        return {k: str(v) for k, v in orjson.loads(prompting).items()}
    return dict(prompting)


def task_property(t: Tally, name: str, tasks: Mapping[str, Mapping[str, Any]] | None
                  ) -> dict[str, Any]:
    """task_id -> its one value of field `name` (None when it has none): the task record's
    when given, else the first non-null value of its attempts. Disagreeing attempts raise
    FieldConflict (unless the task record decides)."""
    index = _index(t, name)
    out: dict[str, Any] = {}
    for key in t.cells:
        tid, value = key[0], key[index]
        task = tasks.get(tid) if tasks else None
        if task is not None and name in task:
            out[tid] = _hashable(task[name])
            continue
        known = out.get(tid)
        if known is None:
            out[tid] = value
        elif value is not None and value != known:
            raise FieldConflict(tid, name, known, value)
    return out


def check_present(t: Tally, names: Iterable[str], tasks: Mapping[str, Mapping[str, Any]] | None
                  ) -> None:
    """FieldAbsent for a --by field no attempt (nor task record) has a value of."""
    for name in names:
        if name == POLICY:
            continue
        index = _index(t, name)
        if all(key[index] is None for key in t.cells) and not (
                tasks and any(task.get(name) is not None for task in tasks.values())):
            raise FieldAbsent(name, tasks is not None)


def group_tasks(t: Tally, by: str | None = None, by_task: Mapping[str, Any] | None = None
                ) -> dict[str, TaskCounts]:
    """Per-task counts of the whole (by=None: {"overall": ...}) or of each value of field `by`:
    from `by_task` (task_id -> value, a task property) when given, else each cell's own."""
    return {name: tasks for (name,), tasks in cross_tasks(t, [(by, by_task)]).items()}


def cross_tasks(t: Tally, by: Sequence[tuple[str | None, Mapping[str, Any] | None]]
                ) -> dict[tuple[str, ...], TaskCounts]:
    """Per-task counts of each combination of the values of several fields (a field None: the
    whole, "overall"), each (field, by_task) as in group_tasks: `--by model --by domain`'s
    model × domain cells."""
    labels = policy_labels(t) if any(field == POLICY for field, _ in by) else {}
    fields = [_field_reader(t, field, by_task, labels) for field, by_task in by]
    getters = [get for get, _ in fields]
    # What decides a cell's groups: its raw values (one getter: itemgetter, a C call), each seen
    # once and mapped to the TaskCounts it adds to; a cell is then a lookup and a dict update.
    raw = getters[0] if len(getters) == 1 else (lambda key: tuple(get(key) for get in getters))
    groups: dict[tuple[str, ...], TaskCounts] = {}
    targets: dict[Any, list[TaskCounts]] = {}
    for key, cell in t.cells.items():
        value = raw(key)
        into = targets.get(value)
        if into is None:
            per_field = (value,) if len(getters) == 1 else value
            combos = _combinations([names(v) for (_, names), v in zip(fields, per_field)])
            into = targets[value] = [groups.setdefault(c, TaskCounts()) for c in combos]
        values, tid = cell_values(cell), key[0]
        for tasks in into:
            tasks.policies.add(key[1])
            mine = tasks.get(tid)
            tasks[tid] = _new_counts(Counts, values if mine is None else _sum(mine, values))
    return groups


def _field_reader(t: Tally, field: str | None, by_task, labels):
    """(key -> the cell's raw value of one field, raw value -> the group names it puts the
    cell's task in)."""
    if field is None:
        return (lambda key: None), (lambda value: ("overall",))
    if field == POLICY:
        return itemgetter(1), (lambda pid: (labels[pid],))
    if by_task is not None:
        return (lambda key: by_task[key[0]]), _group_names
    return itemgetter(_index(t, field)), _group_names


def _combinations(per_field: list[Sequence[str]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for names in per_field:
        out = [(*o, n) for o in out for n in names]
    return out


def _group_names(value: Any) -> Sequence[str]:
    """The groups a value puts its task in: a list (tags) one per item, so the groups overlap."""
    if isinstance(value, tuple):
        return [str(v) for v in dict.fromkeys(value) if v is not None] or (MISSING,)
    return (MISSING,) if value is None else (str(value),)


def _sum(mine: Counts, values: Sequence) -> tuple:
    """Two Counts' values added (the `seen` bitmasks joined)."""
    return (*map(add, mine[:-1], values[:-1]), mine[-1] | values[-1])


def common_repeats(tasks: TaskCounts) -> int:
    """The largest k every task can answer: the smallest clean n (tasks with n = 0 do not
    count). 0 when there are none."""
    ns = [c.attempts for c in tasks.values() if c.attempts > 0]
    return min(ns) if ns else 0


def default_ks(repeats: int) -> list[int]:
    """1, 5 and the largest common repeat count, as far as the data allows."""
    return sorted({k for k in (1, 5, repeats) if 1 <= k <= repeats})
