"""grade: turn episodes' database end states into rewards, and prove tasks sound."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import (
    bundled,
    common_options,
    judge_options,
    preflight_option,
    run,
    tool_group,
)
from endstate.core.console import stdio
from endstate.core.console.progress import Progress, note
from endstate.core.env.changes import row_count
from endstate.core.episode.preflight import check_endpoints, needs_judge
from endstate.core.errors import ConfigurationError, EndstateError, ExitCode, InputError
from endstate.core.grading.grader import Grader, TaskIndex, builtin_task_files, check_recorded_on
from endstate.core.records.jsonl import fail, read_jsonl, write_jsonl
from endstate.core.records.keys import MODES
from endstate.grade.audit import Tally, audited
from endstate.grade.authoring.cli import import_group, new_domain
from endstate.grade.listing import count, listing, matches, summary_table
from endstate.grade.sensitivity import seen_values
from endstate.grade.show import show
from endstate.grade.state import output_path, pick_episode, write_state
from endstate.grade.validate import Attempted, validate_task


@tool_group(default="score")
def cli():
    """Grade episodes by the end state of their database, or validate tasks.

    \b
      grade episodes.jsonl > graded.jsonl          # same as: grade score episodes.jsonl
      grade validate my_tasks.jsonl                # prove tasks sound
      grade tasks --summary                        # count the built-in tasks
      grade audit graded.jsonl                     # successes that got there another way
    """


@cli.command()
@click.argument("episodes", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--tasks", "task_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Task definitions (JSONL, repeatable). Default: the built-in suites.")
@judge_options
@preflight_option
@common_options(domains=True, skip_invalid=True, quiet=True)
def score(episodes, task_files, domains, judge, preflight, skip, quiet):
    """Emit each episode with its reward (1 if every check passes, 0 if not, null on system error).

    The terminal state is rebuilt from the domain seed + the task's init + the episode's recorded
    diff, so stored episodes can be re-graded with changed checks without re-running anything.
    Reads EPISODES files or stdin.

    \b
    Example:
      grade --tasks tasks/bench/retail.jsonl episodes.jsonl | jq -c '{task_id, reward}'
    """
    tasks = TaskIndex(domains, task_files)
    check_endpoints(None, judge if needs_judge(list(tasks)) else None, quiet=quiet, enabled=preflight)
    grader = Grader(domains, judge)
    counts = {0: 0, 1: 0, None: 0}
    problems: dict[str, str | None] = {}  # per task: why it cannot be graded here

    def graded():
        for loc, episode in read_jsonl(list(episodes), "episode", skip=skip):
            task = tasks.get(episode["task_id"])
            if task is None:
                fail(loc, tasks.unknown(episode["task_id"]), skip)
                continue
            if task["id"] not in problems:  # a judge check and no judge: before grading, as probe
                problems[task["id"]] = grader.task_problem(task)
            if problems[task["id"]]:
                fail(loc, f"task {task['id']} ({tasks.where[task['id']]}) {problems[task['id']]}", skip)
                continue
            try:
                result = grader.grade(episode, task)
            except ConfigurationError:
                raise
            except EndstateError as e:
                fail(loc, e.message, skip)
                continue
            counts[result["reward"]] += 1
            yield result

    write_jsonl(graded(), kind="graded_episode")
    if not quiet:
        click.echo(f"graded {sum(counts.values())}: reward 1 ×{counts[1]}, 0 ×{counts[0]}, "
                   f"system_error ×{counts[None]}", err=True)


@cli.command()
@click.argument("graded", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--tasks", "task_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Task definitions (JSONL, repeatable). Default: the built-in suites.")
@click.option("--summary", is_flag=True,
              help="Print a table per task (audited, got there another way, by kind, the checks "
              "that read the differences) instead of the records.")
@click.option("--duplicates", type=click.Choice(MODES), default="error", show_default=True,
              help="Two graded episodes with one episode_id: a bad line naming both (error), or "
                   "audit the first or the last read and count the other.")
@common_options(domains=True, skip_invalid=True, quiet=True)
def audit(graded, task_files, summary, duplicates, domains, skip, quiet):
    """List the successes that got there another way: for each graded episode with reward 1, the
    rows where its end state differs from the one the task's gold calls leave (`extra`: changed
    only by the episode; `different`: changed by both, to other values; `missing`: changed only
    by gold), with gold's and the episode's values, and the checks that read those tables.

    Emits one record per flagged episode; a per-task summary goes to stderr. Episodes with
    reward 0 or null are skipped and counted. Reads GRADED files (grade's output) or stdin.

    \b
    Example:
      grade --tasks tasks/bench/retail.jsonl episodes.jsonl | grade audit --tasks tasks/bench/retail.jsonl
      grade audit graded.jsonl | jq -c '.rows[] | {table, key, kind, columns}'
      grade audit --summary graded.jsonl
    """
    tally = Tally()
    records = audited(read_jsonl(list(graded), "graded_episode", skip=skip),
                      TaskIndex(domains, task_files), Grader(domains), tally, skip, duplicates)
    if summary:
        for _ in records:  # the table counts them all
            pass
        stdio.echo(tally.table())
    else:
        write_jsonl(records, kind="audit")
    if not quiet:
        click.echo(tally.total_line() + ("" if summary else "\n" + tally.task_lines()).rstrip(),
                   err=True)


@cli.command()
@click.argument("task_files", nargs=-1, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@judge_options
@preflight_option
@common_options(domains=True, skip_invalid=True, quiet=True)
def validate(task_files, domains, judge, preflight, skip, quiet):
    """Prove tasks sound: gold passes, doing nothing fails, dropping any single writing gold call
    fails, and so does changing any argument of one that the call does not list as `free`. Emits
    one verdict per task; exits 1 if any task is unsound.

    Without TASK_FILES, validates the built-in suites. Judge checks are exercised only when a
    judge is configured; otherwise they are listed as unverified.

    \b
    Example:
      grade validate tasks/bench/retail.jsonl | jq -c 'select(.sound | not)'
    """
    tasks = TaskIndex(domains, task_files or builtin_task_files(domains), skip=skip)
    check_endpoints(None, judge if needs_judge(list(tasks)) else None, quiet=quiet, enabled=preflight)
    grader = Grader(domains, judge)
    seen = seen_values(tasks)  # arguments are varied with values they have in other tasks' gold
    unsound, attempted = [], Attempted()
    progress = Progress(len(tasks.by_id), "validate", unit="task", quiet=quiet, counts=("sound", "unsound"))

    def verdicts():
        for task in tasks:
            verdict = validate_task(grader, task, seen)
            where = f"{tasks.where[verdict['task_id']]}: task {verdict['task_id']}"
            if not verdict["sound"]:
                unsound.append(verdict)
                note(f"{where} is unsound: " + "; ".join(verdict["problems"]))
            if not quiet:
                for warning in verdict["warnings"]:
                    note(f"{where}: warning: {warning}")
            attempted.add(verdict)
            progress.advance({"sound" if verdict["sound"] else "unsound": 1})
            yield verdict

    try:
        write_jsonl(verdicts(), kind="verdict")
    finally:
        progress.close()
    if not quiet:
        note(attempted.line())
    if unsound or (skip and skip.entries):
        sys.exit(ExitCode.NO)


@cli.command()
@click.argument("task_files", nargs=-1, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--domain", "domain_names", multiple=True, help="Only tasks of this domain (repeatable: any of).")
@click.option("--split", "splits", multiple=True, help="Only tasks of this split (repeatable: any of).")
@click.option("--tag", "tags", multiple=True,
              help="Only tasks with a tag matching this pattern, e.g. 'template:*' (repeatable: any of).")
@click.option("--summary", is_flag=True, help="Print a table of task counts per domain × split instead.")
@click.option("--full", is_flag=True, help="Write the task records themselves instead of listing lines.")
@common_options(domains=True, skip_invalid=True)
def tasks(task_files, domain_names, splits, tags, summary, full, domains, skip):
    """List tasks: one JSONL line per task with its id, domain, split, tags, number and kinds of
    checks, gold calls (and how many write), max_turns and the user's opening.

    Without TASK_FILES, lists the built-in suites. Filters combine: a task is listed when it
    passes every given filter.

    \b
    Example:
      grade tasks --domain retail --tag policy-trap | jq -r '[.id, .gold_writes] | @tsv'
      grade tasks --split train --tag 'template:*' | jq -r '.tags[]' | grep template: | sort | uniq -c
      grade tasks --summary
      grade tasks --full --split bench --domain bank > bank_bench.jsonl
    """
    if summary and full:
        raise click.UsageError("--summary and --full are alternatives; pass one of them")
    selected = ((loc, t) for loc, t in read_jsonl(list(task_files) or builtin_task_files(domains),
                                                   "task", skip=skip)
                if matches(t, domain_names, splits, tags))
    if summary:
        stdio.echo(summary_table(count(t for _, t in selected)))
    elif full:
        write_jsonl(t for _, t in selected)
    else:
        writing: dict[str, frozenset[str]] = {}

        def lines():
            for loc, t in selected:
                if t["domain"] not in writing:
                    try:
                        tools = domains[t["domain"]].tools
                    except EndstateError as e:
                        fail(loc, e.message, skip)
                        continue
                    writing[t["domain"]] = frozenset(n for n, tool in tools.items() if tool.writes)
                yield listing(t, writing[t["domain"]])

        write_jsonl(lines())


@dataclass
class StateOf:
    """Whose state `grade state` writes: an episode's (picked by --task, --attempt, --episode-id),
    or with --gold or --initial a task's."""

    task_id: str | None
    attempt: int | None
    episode_id: str | None
    gold: bool
    initial: bool

    def __post_init__(self) -> None:
        if self.gold and self.initial:
            raise click.UsageError("--gold and --initial are alternatives; pass one of them")
        if self.of_task and (self.attempt is not None or self.episode_id):
            raise click.UsageError("--gold and --initial write a task's state: --task names it, "
                                   "and EPISODES, --attempt and --episode-id do not apply")

    @property
    def of_task(self) -> bool:
        return bool(self.task_id and (self.gold or self.initial))


@cli.command()
@click.argument("episodes", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--task", "task_id", help="The episode's task id (with --gold or --initial: the task).")
@click.option("--attempt", type=ranges.count(0), help="The episode's attempt number.")
@click.option("--episode-id", help="The episode's episode_id, when --task and --attempt match several.")
@click.option("--gold", is_flag=True, help="The end state of the task's gold calls instead.")
@click.option("--initial", is_flag=True, help="Seed + the task's init instead, before any call.")
@click.option("-o", "--out", "out_file", required=True, type=click.Path(dir_okay=False),
              help="The SQLite file to write.")
@click.option("--diff-db", is_flag=True,
              help="Add a _changed_<table> table per table: the before/after rows of each change.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@click.option("--tasks", "task_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Task definitions (JSONL, repeatable). Default: the built-in suites.")
@common_options(domains=True, skip_invalid=True, quiet=True)
@bundled("which", StateOf)
def state(episodes, which: StateOf, out_file, diff_db, force, task_files, domains, skip, quiet):
    """Write the database an episode left behind to a SQLite file (sqlite3, sqlite-utils and
    Datasette open it), rebuilt as the grader rebuilds it: seed + the task's init + the episode's
    recorded diff. --gold writes the task's gold end state instead, --initial seed + init.

    Reads EPISODES files or stdin; --task, --attempt and --episode-id pick the episode (not needed
    when only one is there). With --gold or --initial, --task alone names the task.

    \b
    Example:
      grade state episodes.jsonl --task retail-cancel-pending --attempt 0 --diff-db -o end.db
      sqlite-utils tables end.db --counts
      sqlite-utils query end.db "select _side, id, status from _changed_orders"
      grade state --gold --task retail-cancel-pending -o gold.db
    """
    if diff_db and which.initial:
        raise click.UsageError("--diff-db shows what an episode changed on seed + init; "
                               "--initial has no changes: leave one out")
    if which.of_task and episodes:
        raise click.UsageError("--gold and --initial write a task's state: --task names it, and "
                               "EPISODES, --attempt and --episode-id do not apply")
    gold, initial, task_id = which.gold, which.initial, which.task_id
    out = output_path(out_file, force)
    loc = episode = None
    if not which.of_task:
        loc, episode = pick_episode(read_jsonl(list(episodes), "episode", skip=skip),
                                    ", ".join(episodes) or "stdin", task_id, which.attempt,
                                    which.episode_id)
        task_id = episode["task_id"]
    tasks = TaskIndex(domains, task_files)  # after the episode: reading every suite takes ~1 s
    task = tasks.get(task_id)
    if task is None:
        raise EndstateError(tasks.unknown(task_id))
    domain = domains[task["domain"]]
    if gold or initial:
        changes, what = (Grader(domains).gold_changes(task), "gold") if gold else ({}, "initial")
    else:
        check_recorded_on(domain, episode, task)
        changes, what = episode["changes"], f"episode {episode['episode_id']}"
    try:
        counts = write_state(domain, task.get("init"), changes, out, diff_tables=diff_db)
    except EndstateError as e:
        raise (InputError(f"{loc}: {e.message}") if loc else e) from None
    if not quiet:
        click.echo(f"wrote {out}: {what} of task {task_id} ({domain.name}), {len(counts)} tables, "
                   f"{sum(counts.values()):,} rows, {row_count(changes)} changed row(s)", err=True)


cli.add_command(show)  # grade show: grade/show.py
cli.add_command(import_group)  # grade import tau2: grade/authoring/cli.py
cli.add_command(new_domain)  # grade new-domain: grade/authoring/cli.py

main = run(cli)

if __name__ == "__main__":  # python -m endstate.grade.cli, as under torchrun or srun
    main()
