"""endstate's public API: what a domain's tools.py and seed.py, a plugin, and a program that uses
endstate as a library import. Every name in `__all__` is kept, with its meaning, across minor
releases; a change is announced by a DeprecationWarning one release ahead (docs/api.md). Every
other module of endstate is internal: it may move or change in any release.

    from endstate.api import Db, ToolError, tool                      # a domain's tools.py
    from endstate.api import load_domains, load_tasks, replay, grade  # a program

Records cross this boundary as typed Structs (Task, Episode, GradedEpisode, Attempt); a record
read from a file is checked against its schema first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

# -- a domain's tools and seed, and what a program reads of a domain -----------------------------
from endstate.core.agent.interpret import TOOL_LISTINGS, Parsed, ToolListing, render_signature
from endstate.core.agent.session import AgentBackend, AgentSession, FewShot, Turn
from endstate.core.env.documents import Documents
from endstate.core.env.domain import Domain, Domains
from endstate.core.env.folders import DOMAINS
from endstate.core.env.nested import Mapping, insert_document, rebuild_document
from endstate.core.env.results import RESULT_FORMATS
from endstate.core.env.tools import (
    Db,
    Tool,
    ToolError,
    customer_finder,
    employee_finder,
    escalator,
    insert_rows,
    iso_date,
    positive_cents,
    rounded_within,
    tool,
)

# -- for a plugin: the extension points -----------------------------------------------------------
from endstate.core.episode.backends import BACKENDS, Backend, LiveSampler
from endstate.core.episode.config import RunConfig
from endstate.core.episode.users import (
    SIMULATED_USERS,
    STOP,
    SimulatedUser,
    UserEndpoint,
    UserKind,
)
from endstate.core.grading.checks import CHECK_KINDS, TaskError
from endstate.core.grading.checks import Context as CheckContext
from endstate.core.grading.judge import Judge

# -- records --------------------------------------------------------------------------------------
from endstate.core.records.structs import (
    AssistantMessage,
    Attempt,
    CheckResult,
    Episode,
    GradedEpisode,
    Message,
    SystemMessage,
    Task,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from endstate.core.registry import Registry, RegistryError
from endstate.evalstats.statistics import STATISTICS, Statistic

__all__ = [  # docs/api.md says what each is
    "BACKENDS", "CHECK_KINDS", "DOMAINS", "RESULT_FORMATS", "SIMULATED_USERS", "STATISTICS", "STOP",
    "TOOL_LISTINGS", "AgentBackend", "AgentSession", "AssistantMessage", "Attempt", "Backend",
    "CheckContext", "CheckResult", "Db", "Documents", "Domain", "Domains", "Episode", "FewShot",
    "GradedEpisode", "Grader", "Judge", "LiveSampler", "Mapping", "Message", "Parsed", "Registry",
    "RegistryError", "RunConfig", "SimulatedUser", "Statistic", "SystemMessage", "Task",
    "TaskError", "Tool", "ToolCall", "ToolError", "ToolListing", "ToolMessage", "Turn", "Usage",
    "UserEndpoint", "UserKind", "UserMessage", "attempt_of", "customer_finder", "employee_finder",
    "escalator", "grade", "insert_document", "insert_rows", "iso_date", "load_domains",
    "load_tasks", "positive_cents", "read_records", "rebuild_document", "render_signature",
    "replay", "rounded_within", "run_episode", "run_episodes", "summary", "tool", "tool_of",
    "write_records",
]


def tool_of(fn: Any) -> Tool:
    """The Tool a `@tool` function declares: its schema (what the agent sees), its parameters and
    `argument_problem(args)` (what the agent would be told of bad arguments, or None)."""
    found = getattr(fn, "__endstate_tool__", None)
    if found is None:
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is not marked @tool")
    return found


def load_domains(*folders: str | Path) -> Domains:
    """The domains a run sees, by name: the built-in ones, those installed plugins register
    (DOMAINS), then those in `folders` (a domain folder, or a folder of domain folders)."""
    return Domains([str(f) for f in folders])


def _task(task: Task | dict[str, Any]) -> dict[str, Any]:
    """A task as the grader and the sandbox read it: the record a file holds."""
    return msgspec.to_builtins(task if isinstance(task, Task) else Task.of(task))


def read_records(kind: str, *paths: str | Path) -> list[Any]:
    """The records of JSONL files (`-`: stdin), each checked against the schema of `kind`
    ("task", "episode", "graded_episode", "attempt"; else records as dicts). A bad line raises
    endstate's InputError naming FILE:LINE."""
    from endstate.core.records.jsonl import read_jsonl

    struct = {"task": Task, "episode": Episode, "graded_episode": GradedEpisode,
              "attempt": Attempt}.get(kind)
    records = [r for _, r in read_jsonl([str(p) for p in paths], kind)]
    return records if struct is None else [msgspec.convert(r, struct) for r in records]


def write_records(records: Iterable[Any], file: IO[bytes] | None = None, kind: str | None = None) -> int:
    """Write records (Structs or dicts) as JSONL to a binary file (default: stdout), whole lines
    only; with `kind`, each is checked against that schema first. Returns how many."""
    from endstate.core.records.jsonl import write_jsonl

    return write_jsonl(records, file, kind)


def load_tasks(*paths: str | Path) -> list[Task]:
    """The tasks of task files, each checked against the task schema; a task id seen twice is an
    error naming both lines."""
    from endstate.core.episode.plan import load_tasks as load

    return [Task.of(t) for t in load([str(p) for p in paths], None)]


def replay(task: Task | dict[str, Any], steps: Sequence[dict[str, Any]] | None = None, *,
           domains: Domains | None = None) -> Episode:
    """The episode that gold-shaped `steps` make on a fresh sandbox of the task's start state:
    `{"tool": NAME, "args": {...}}` calls a tool, `{"say": TEXT}` is the agent speaking. Without
    `steps`, the task's own gold."""
    from endstate.core.episode.replays import replay_episode

    record = _task(task)
    domains = domains or load_domains()
    return replay_episode(domains[record["domain"]], record,
                          record["gold"] if steps is None else list(steps))


def run_episodes(tasks: Iterable[Task | dict[str, Any]], config: RunConfig | None = None, *,
                 repeats: int = 1, domains: Domains | None = None) -> list[Episode]:
    """Run each task `repeats` times with a model (the agent backend, simulated user, sampling
    and endpoints of `config`; default: the embedded model on CPU with the scripted user), at
    most config.jobs at once, and return the episodes in (task, attempt) order. The backend is
    built for the call and closed at its end: pass every task of a campaign in one call."""
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.runtime import run_episodes as run

    cfg = config or RunConfig()
    domains = domains or load_domains()
    keys = [(record, attempt) for record in map(_task, tasks) for attempt in range(repeats)]
    got: dict[tuple[str, int], Episode] = {}

    def keep(task: dict[str, Any], episode: Episode) -> None:
        got[(episode.task_id, episode.attempt)] = episode

    run(keys, cfg, domains, build_backend(cfg) if keys else None, keep, quiet=True)
    return [got[(t["id"], a)] for t, a in keys]


def run_episode(task: Task | dict[str, Any], config: RunConfig | None = None, *,
                domains: Domains | None = None) -> Episode:
    """One model-driven episode of `task` (run_episodes with one key)."""
    return run_episodes([task], config, domains=domains)[0]


class Grader:
    """Grades episodes: rebuilds each one's end state from its recorded diff and runs its task's
    checks. Keep one for many episodes: the gold replays its checks need are made once."""

    def __init__(self, domains: Domains | None = None, judge: Judge | None = None):
        from endstate.core.grading.grader import Grader as Checks

        self._checks = Checks(domains or load_domains(), judge)

    def grade(self, episode: Episode, task: Task | dict[str, Any]) -> GradedEpisode:
        """The graded episode: reward 1 when every check passes, 0 when one fails, None (status
        system_error) when the episode, the task's checks or the judge failed for reasons that are
        not the agent's."""
        return msgspec.convert(self._checks.grade(msgspec.to_builtins(episode), _task(task)),
                               GradedEpisode)


def grade(episode: Episode, task: Task | dict[str, Any], *, domains: Domains | None = None,
          judge: Judge | None = None) -> GradedEpisode:
    """One episode graded (Grader.grade; for many, keep one Grader)."""
    return Grader(domains, judge).grade(episode, task)


def attempt_of(graded: GradedEpisode) -> Attempt:
    """The attempt record of a graded episode: what probe writes and summary reads."""
    from endstate.core.records.episode import attempt_record

    return msgspec.convert(attempt_record(msgspec.to_builtins(graded)), Attempt)


def summary(attempts: Iterable[Attempt | GradedEpisode], *, ks: Sequence[int] | None = None,
            by: Sequence[str] = ()) -> dict[str, Any]:
    """evalstats' metrics object over attempts (or graded episodes), as `evalstats` prints it:
    `overall` (pass@1 with its interval, pass@k, pass^k, observed k/k, cost), and a by_FIELD map
    per field of `by` (domain, template, tags, split, policy). `ks`: default 1, 5 and the largest
    common repeat count. Two clean attempts of one (policy, task, attempt) are an error."""
    from endstate.evalstats.intervals import POPULATION
    from endstate.evalstats.study import Study
    from endstate.evalstats.tally import tally_fn

    fields = [f for f in by if f != "policy"]
    tally = tally_fn(fields, {})
    records = [attempt_of(a) if isinstance(a, GradedEpisode) else a for a in attempts]
    counted = tally([msgspec.convert(msgspec.to_builtins(r), tally.struct) for r in records])
    repeated = counted.repeated()
    if repeated:
        raise ValueError(f"task {repeated[0]!r} has two clean attempts of one (policy, attempt); "
                         "keep one of each")
    report = Study(counted, None, None, POPULATION).report(list(by),
                                                           None if ks is None else list(ks))
    return report.to_builtins()


# OpenEnv's typed client and messages for `rollout serve-openenv` (the openenv extra): imported
# when asked, outside __all__, so `from endstate.api import *` never needs openenv-core
OPENENV = ("EndstateAction", "EndstateEnvClient", "EndstateObservation", "EndstateState")


def __getattr__(name: str) -> Any:
    if name in OPENENV:
        from endstate.rollout import openenv_types

        return getattr(openenv_types, name)
    raise AttributeError(f"module 'endstate.api' has no attribute {name!r}")
