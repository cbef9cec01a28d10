"""Which (task, attempt) keys a run covers: task files read with unique ids, the tasks a filter
takes (--task, --tag), Slurm shards, the keys an earlier output already holds (--resume), and the
plan of what is left, in that order."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click
import orjson

from endstate.core.errors import EndstateError, FileError, InputError
from endstate.core.records.jsonl import Loc, SkipLog, fail, read_jsonl
from endstate.core.records.schemas import STAGES, stage_of

if TYPE_CHECKING:
    from endstate.core.env.domain import Domains


def parse_shard(value: str | None) -> tuple[int, int]:
    if not value:
        return 0, 1
    try:
        i, n = (int(x) for x in value.split("/"))
        assert 0 <= i < n
    except (ValueError, AssertionError):
        raise click.BadParameter(f"{value!r}: use I/N with 0 <= I < N, e.g. 3/16") from None
    return i, n


def shard_of(tasks: list[dict[str, Any]], shard: tuple[int, int]) -> list[dict[str, Any]]:
    i, n = shard
    return [t for k, t in enumerate(tasks) if k % n == i]


def done_keys(path: str | None, out: IO[bytes] | None = None,
              kind: str | None = None) -> set[tuple[str, int]]:
    """(task_id, attempt) keys with a clean record in a resume file (attempt or episode records).
    Keys that only have system errors are not done: resuming re-runs them, and the clean record
    supersedes the error (bucket and evalstats count clean records).

    `kind` (attempt, episode): the records this command writes; a file of another stage of the
    pipeline is a bad input naming its line, what it holds and what was expected (graded episodes
    given to probe once made it report nothing left to do).

    A last line without its newline (a run killed mid-write) is repaired when `out`, where this
    run writes, appends to the same file (`--resume F >> F`, the documented recipe): a cut record
    is removed (its key is not done, so it runs again) and a whole one gets its newline, so the
    next record cannot be glued onto it."""
    if not path or not os.path.exists(path):
        return set()
    keys = set()
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
            stage = stage_of(record) if kind is not None and isinstance(record, dict) else None
            if stage not in (None, kind):
                raise InputError(f"{path}:{n}: --resume takes the records this command writes, "
                                 f"{STAGES[kind]}; this line is {STAGES[stage]}")
            if record.get("status") != "system_error":
                keys.add((record["task_id"], record["attempt"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            if n == len(lines):  # killed mid-write: the last line is cut off, and not counted
                click.echo(f"{path}:{n}: ignoring a partial last line", err=True)
                continue
            raise InputError(f"{path}:{n}: not a record with task_id and attempt; "
                             "--resume takes this tool's own output") from None
    if lines[-1].strip() and out is not None and _same_file(out, path):
        if _is_record(lines[-1]):
            out.write(b"\n")
            out.flush()
        else:
            repair_tail(path)
    return keys


def _is_record(raw: bytes) -> bool:
    try:
        return isinstance(orjson.loads(raw), dict)
    except orjson.JSONDecodeError:
        return False


def _same_file(out: IO[bytes], path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(out.fileno()), os.stat(path))
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file descriptor (CliRunner)
        return False


def repair_tail(path: str) -> None:
    """Cut a partial last line (a run killed mid-write) so appended lines stay valid JSONL."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
            click.echo(f"{path}: removed a partial last line left by an interrupted run", err=True)


def plan(tasks: list[dict[str, Any]], n: int, skip: set[tuple[str, int]]) -> list[tuple[dict, int]]:
    return [(t, a) for t in tasks for a in range(n) if (t["id"], a) not in skip]


def read_tasks(paths: Iterable[str], skip: SkipLog | None) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """(location, task) of every task in `paths`; a task id seen before is a bad record."""
    seen: dict[str, Loc] = {}
    for loc, task in read_jsonl(list(paths), "task", skip=skip):
        if task["id"] in seen:
            fail(loc, f"duplicate task id {task['id']!r} (first at {seen[task['id']]}); "
                 "task ids must be unique", skip)
            continue
        seen[task["id"]] = Loc(loc.file, loc.line)
        yield loc, task


def load_tasks(paths: Iterable[str], skip: SkipLog | None) -> list[dict[str, Any]]:
    return [task for _, task in read_tasks(paths, skip)]


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks to take: `--task ID` and `--tag TAG` (rollout, probe), `--domain`, `--split` and
    `--tag` (grade tasks). Values of one filter are alternatives (any of them); different filters
    must all hold. Ids and tags are shell-style patterns (`retail-*`, `template:*`). `shard`
    (--shard I/N): of the runnable tasks, every N-th from the I-th (Slurm array jobs)."""

    ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    shard: tuple[int, int] = (0, 1)

    def __call__(self, task: dict[str, Any]) -> bool:
        if not self.takes_id(task["id"]):
            return False
        if self.domains and task["domain"] not in self.domains:
            return False
        if self.splits and task.get("split") not in self.splits:
            return False
        tags = task.get("tags", [])
        return not self.tags or any(fnmatchcase(t, p) for t in tags for p in self.tags)

    def takes_id(self, task_id: str) -> bool:
        """The id filter alone (grade show picks episodes by their task_id with it)."""
        return not self.ids or any(fnmatchcase(task_id, p) for p in self.ids)

    @property
    def active(self) -> bool:
        return bool(self.ids or self.tags or self.domains or self.splits)

    def describe(self) -> str:
        """The filter as the flags that make it, e.g. `--task 'retail-*' --tag refund`."""
        flags = (("--task", self.ids), ("--tag", self.tags), ("--domain", self.domains),
                 ("--split", self.splits))
        return " ".join(f"{flag} {value!r}" for flag, values in flags for value in values)


def runnable_tasks(paths: Iterable[str], domains: Domains, skip: SkipLog | None,
                   grading: Callable[[dict[str, Any]], str | None] | None = None,
                   select: TaskFilter = TaskFilter()) -> list[dict[str, Any]]:
    """The tasks of `paths` that `select` takes, each checked before any episode runs: its domain
    is known, the tools it allows exist there, its user's patterns compile, and, when episodes are
    graded here, `grading` (the grader's task_problem) has nothing against it. A task that fails
    is FILE:LINE: an input error, or left out under --skip-invalid. A filter that takes no task is
    an error: a typo in `--task` must not look like a finished run."""
    paths = list(paths)
    tasks, selected = [], 0
    for loc, task in read_tasks(paths, skip):
        if not select(task):
            continue
        selected += 1
        problem = _unrunnable(task, domains) or (grading and grading(task))
        if problem:
            fail(loc, f"task {task['id']}: {problem}", skip)
            continue
        tasks.append(task)
    if select.active and not selected:
        raise EndstateError(f"{select.describe()} selects no task in {', '.join(paths) or 'stdin'}; "
                            "`grade tasks FILE` lists their ids and tags")
    return shard_of(tasks, select.shard)


def _unrunnable(task: dict[str, Any], domains: Domains) -> str | None:
    # Imported here: bucket and grade read task files through this module without the sandbox.
    from endstate.core.env.sandbox import init_state

    try:
        domain = domains[task["domain"]]
    except EndstateError as e:
        return e.message
    unknown = sorted(set(task.get("tools") or ()) - set(domain.tools))
    if unknown:
        return f"allows unknown tool(s) {unknown}; domain {domain.name} has {', '.join(domain.tools)}"
    try:  # what every episode of the task starts from (kept, so the episodes do not pay again)
        init_state(domain, task.get("init"))
    except EndstateError as e:
        return f"its init does not apply: {e.message}"
    # Imported here: rollout and probe load the episode loop anyway; grade, which imports this
    # module, need not.
    from endstate.core.episode.users import reactions_problem

    return reactions_problem(task["user"])


class NamedWriter:
    """A file opened for appending whose write errors name it (a full disk under --episodes FILE
    is that file's, not stdout's)."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.file = open(path, "ab")
        except OSError as e:
            raise FileError(f"{path}: cannot open for writing: {e.strerror or e}") from None

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as e:
            raise FileError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def flush(self) -> None:
        try:
            self.file.flush()
        except OSError as e:
            raise FileError(f"{self.path}: cannot write: {e.strerror or e}") from None


def episodes_path_writer(path: str | None) -> NamedWriter | None:
    """An append-mode writer for --episodes FILE, repaired first if a killed run cut a line."""
    if not path:
        return None
    repair_tail(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return NamedWriter(path)


def refuse(ids: list[str], problem: str, fix: str) -> None:
    """Stop before any episode: exit 2 naming the tasks (the first ten) and the flag that fixes it."""
    if ids:
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        raise EndstateError(f"{len(ids)} task(s) {problem}: {shown}; {fix}")


# -- which tasks may run: the user a task needs ---------------------------------------------------

def unplayable(tasks: Iterable[dict[str, Any]], user: str) -> list[str]:
    """Ids of the tasks the simulated user kind `user` cannot play (UserKind.plays): under the
    scripted user, a task whose user has no script, no reactions and no default reply (a task
    whose opening is all its user has to say declares it with `"script": []`)."""
    from endstate.core.episode.users import SIMULATED_USERS  # as in _unrunnable

    plays = SIMULATED_USERS[user].plays
    return [t["id"] for t in tasks if not plays(t)]


def refuse_unplayable(tasks: Iterable[dict[str, Any]], user: str) -> None:
    """Exit 2 before any episode when the simulated user cannot play some tasks (unplayable)."""
    from endstate.core.episode.users import SIMULATED_USERS  # as in _unrunnable

    refuse(unplayable(tasks, user), *SIMULATED_USERS[user].refusal)
