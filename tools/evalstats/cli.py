"""evalstats: reliability statistics of attempt records, and paired comparison of two runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options, parse_prices, run, tool_group
from endstate.core.console import stdio
from endstate.core.errors import EndstateError, ExitCode, InputError
from endstate.core.records.jsonl import SkipLog, read_jsonl, write_jsonl
from endstate.core.records.keys import MODES, fold_attempts
from endstate.evalstats import coverage as C
from endstate.evalstats import groups as G
from endstate.evalstats import intervals as I
from endstate.evalstats import metrics as M
from endstate.evalstats import render
from endstate.evalstats import tally as T
from endstate.evalstats.compare import compare as compare_runs
from endstate.evalstats.prompting_check import warn_mixed_prompting


def _ks(ctx, param, value):
    if value is None:
        return None
    try:
        ks = sorted({int(x) for x in value.split(",")})
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from None
    if ks[0] < 1 or ks[-1] > ranges.MAX_REPEATS:
        raise click.BadParameter(f"k values must be from 1 to {ranges.MAX_REPEATS}, e.g. 1,5,20")
    return ks


format_option = click.option("--format", "fmt", type=click.Choice(["json", "table", "markdown"]),
                             default="json", show_default=True,
                             help="json: one object (jq-friendly); table or markdown: for people.")
workers_option = click.option("--procs", "workers", type=ranges.PROCS,
                              help="Processes that read big files.  [default: the CPU count]")


@dataclass
class Reading:
    """How the attempts are read (duplicates, processes) and seen (task fields, the estimand)."""

    tasks_file: str | None
    estimand: str
    duplicates: str
    workers: int | None


@dataclass
class Output:
    fmt: str
    plot_file: str | None


@dataclass
class Gate:
    """The coverage gate: every key of expect_tasks × expect_repeats must be there."""

    expect_tasks: str | None
    expect_repeats: int | None
    allow_incomplete: bool
    strict: bool

    def __post_init__(self) -> None:
        if (self.expect_tasks is None) != (self.expect_repeats is None):
            raise click.UsageError("--expect-tasks and --expect-repeats go together, e.g. "
                                   "--expect-tasks bench.jsonl --expect-repeats 20")


def reading_and_output_options(plot_help: str):
    """--tasks, --estimand, --duplicates, --procs (as one `reading`), --format and --plot (as
    one `output`) and --skip-invalid, alike in summary and compare."""
    def decorate(fn):
        fn = bundled("output", Output)(bundled("reading", Reading)(fn))
        fn = workers_option(common_options(skip_invalid=True)(fn))
        plot = click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
                            callback=ranges.png, help=plot_help)
        return task_file_option(estimand_option(duplicates_option(format_option(plot(fn)))))

    return decorate


@tool_group(default="summary")
def cli():
    """Reliability statistics of evaluation attempts.

    \b
      evalstats [OPTIONS] FILES...       metrics of the attempts (the `summary` command)
      evalstats compare BASE NEW         paired comparison of two runs
    \b
    Example (from the repository root):
      evalstats --format table schemas/examples/attempt.json
    """


task_file_option = click.option(
    "--tasks", "tasks_file", type=click.Path(dir_okay=False, allow_dash=True),
    help="Task records: a task's domain, template, tags, split (any field of these records) "
    "come from here.  [default: the --expect-tasks file, else the attempts]")
estimand_option = click.option(
    "--estimand", type=click.Choice([I.POPULATION, I.BENCHMARK]), default=I.POPULATION,
    show_default=True, help="population: the tasks are a sample of tasks like them (SE over "
    "tasks); benchmark: this fixed suite, only the attempts are random (within-task variance).")
duplicates_option = click.option(
    "--duplicates", type=click.Choice(MODES), default="error", show_default=True,
    help="Two clean attempt records with one (task_id, attempt): an input error, or keep the "
    "first or the last read.")


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD", callback=ranges.field_names,
              help="Also report per value of this field, as by_FIELD (repeatable).")
@click.option("--k", "ks", callback=_ks, metavar="K,K,...",
              help="k values of pass@k and pass^k.  [default: 1, 5 and the largest common "
              "repeat count]")
@click.option("--cluster", metavar="FIELD", callback=ranges.field_names,
              help="Cluster-robust (CR1) standard errors over the values of this task field.")
@click.option("--price", "prices", multiple=True, callback=parse_prices, metavar="MODEL=IN,OUT",
              help="USD per million agent prompt,completion tokens of MODEL; overrides cost_usd "
              "of its attempts (repeatable).")
@click.option("--expect-tasks", type=click.Path(dir_okay=False, allow_dash=True),
              help="Task records whose every key must be present (coverage gate).")
@click.option("--expect-repeats", type=ranges.REPEATS, help="Attempts 0..N-1 expected per task.")
@click.option("--allow-incomplete", is_flag=True,
              help="Report even when the coverage gate fails (exit 0; the listing still goes to "
              "stderr).")
@click.option("--strict", is_flag=True,
              help="Coverage gate: unexpected keys fail it too (exit 3), not only missing ones.")
@reading_and_output_options("PNG: cost per success against pass@1 by model, and a domain × "
                            "metric heatmap.")
@bundled("gate", Gate)
def summary(files, by_fields, ks, cluster, prices, gate: Gate, reading: Reading, output: Output,
            skip):
    """Metrics of the attempts in FILES (attempt JSONL; `-` or none: stdin).

    pass@1 = successes / clean attempts (pooled) and the task mean, each with its own SE
    (over tasks) and 95% interval; pass@k and pass^k are the unbiased estimators, per task
    then averaged; observed k/k counts the tasks whose every clean attempt succeeded. System
    errors are excluded from the rates and reported; their cost counts. See docs/evalstats.md.

    \b
    Coverage gate: with --expect-tasks and --expect-repeats, every task × attempt key must
    have a clean record; the others are listed on stderr (missing, system_error) and the exit
    status is 3. Unexpected keys are listed and left out (with --strict they fail it too).
    \b
    Examples (from the repository root):
      evalstats schemas/examples/attempt.json | jq .overall.pass_at_1
      evalstats --by domain --k 1,5,20 --format table eval.jsonl
      evalstats --expect-tasks tasks/bench/retail.jsonl --expect-repeats 20 eval.jsonl > metrics.json
    """
    expected = _read_tasks(gate.expect_tasks, skip) if gate.expect_tasks else None
    tasks = _read_tasks(reading.tasks_file, skip) if reading.tasks_file else expected
    fields = list(dict.fromkeys([*by_fields, *([cluster] if cluster else []),
                                 *(["model", "domain"] if output.plot_file else [])]))
    grid = T.Grid(frozenset(expected), gate.expect_repeats) if expected is not None else None
    tally = _tally(list(files), fields, prices, grid, skip, reading)
    if grid is not None:
        _gate(tally, list(expected), gate.expect_repeats, gate.allow_incomplete, gate.strict)
    view = _View(tally, tasks, cluster, reading.estimand)
    report = view.report(by_fields, ks)
    _warn_cost(report["overall"])
    _write(report, output.fmt, render.metrics_table)
    if output.plot_file:
        render.plot_metrics({**report, "by_domain": report.get("by_domain") or view.by("domain")},
                            view.by("model", ks=[]), output.plot_file)


class _View:
    """The tally seen through the task properties: groups and their metrics objects."""

    def __init__(self, tally: T.Tally, tasks: dict | None, cluster: str | None, estimand: str):
        self.tally, self.tasks, self.estimand = tally, tasks, estimand
        self.overall = G.group_tasks(tally).get("overall", {})
        self.clusters = self.property(cluster) if cluster else None
        self.ks: list[int] = []

    def property(self, field: str) -> dict | None:
        try:
            return G.task_property(self.tally, field, self.tasks)
        except G.FieldConflict as e:
            raise InputError(f"evalstats: {e}") from None

    def groups(self, field: str) -> dict[str, G.TaskCounts]:
        try:
            G.check_present(self.tally, [field], self.tasks)
        except G.FieldAbsent as e:
            raise EndstateError(str(e)) from None
        by_task = self.property(field) if G.is_task_field(field, self.tasks) else None
        return G.group_tasks(self.tally, field, by_task)

    def by(self, field: str, ks: list[int] | None = None) -> dict[str, dict]:
        ks = self.ks if ks is None else ks
        return {name: M.metrics(tasks, ks, self.clusters, self.estimand, strict_k=False)
                for name, tasks in sorted(self.groups(field).items())}

    def report(self, by_fields, ks: list[int] | None) -> dict:
        """`overall` (never touched by --by: its default k comes from its own tasks), then a
        by_FIELD map per --by field (a k some task there cannot answer is null there)."""
        self.ks = ks if ks is not None else G.default_ks(G.common_repeats(self.overall))
        try:
            report = {"overall": M.metrics(self.overall, self.ks, self.clusters, self.estimand,
                                           strict_k=ks is not None)}
        except M.KTooLarge as e:
            raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean "
                                f"attempt(s); use k <= {e.n}, or re-run its missing attempts",
                                ExitCode.USAGE) from None
        for field in by_fields:
            report[f"by_{field}"] = self.by(field)
        return report


def _warn_cost(overall: dict) -> None:
    cost = overall["cost"]
    recorded = overall["attempts"] + overall["system_errors"]
    if cost["unpriced_attempts"]:
        click.echo(f"evalstats: {cost['unpriced_attempts']} attempt(s) of a --price model have no "
                   "usage.agent token counts: they are left out of the cost "
                   "(cost.unpriced_attempts)", err=True)
    if 0 < cost["priced_attempts"] < recorded:
        click.echo(f"evalstats: only {cost['priced_attempts']} of {recorded} attempts have a cost "
                   "(cost_usd, or --price for their model); the costs cover those only", err=True)


def _read_tasks(path: str, skip: SkipLog | None) -> dict[str, dict]:
    return {t["id"]: t for _, t in read_jsonl([path], "task", skip=skip)}


def _gate(tally: T.Tally, expected: list[str], repeats: int, allow_incomplete: bool,
          strict: bool) -> None:
    problems = C.coverage(tally.keys, expected, repeats)
    bad = [p for p in problems if p.kind != C.UNEXPECTED]
    extra = [p for p in problems if p.kind == C.UNEXPECTED]
    total = len(set(expected)) * repeats
    if bad:
        kinds = {k: sum(1 for p in bad if p.kind == k) for k in (C.MISSING_KEY, C.SYSTEM_ERROR)}
        click.echo(f"coverage: {len(bad)} of {total} task × attempt keys have no clean record "
                   f"({', '.join(f'{k} {v}' for k, v in kinds.items())}); re-run them:", err=True)
    if extra:
        click.echo(f"coverage: {len(extra)} recorded key(s) are not expected (task not in the "
                   f"expected tasks, or attempt >= {repeats}); left out of the metrics:", err=True)
    for kind, task_id, attempt, count in bad + extra:
        tail = f"\t{count} records" if kind == C.UNEXPECTED and count > 1 else ""
        click.echo(f"{kind}\t{task_id}\t{attempt}{tail}", err=True)
    failed = len(bad) + (len(extra) if strict else 0)
    if failed and not allow_incomplete:
        what = "to re-run" if not strict else "missing, hit by system errors or unexpected"
        raise EndstateError(f"coverage gate failed: {failed} key(s) {what} (listed above); "
                            "pass --allow-incomplete to report anyway", ExitCode.INCOMPLETE)


def _write(report: dict, fmt: str, table) -> None:
    if fmt == "json":
        write_jsonl([report])
    else:
        stdio.echo(table(report, markdown=fmt == "markdown"))


@cli.command()
@click.argument("base", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("new", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD", callback=ranges.field_names,
              help="Also compare per value of this attempt field, as by_FIELD (repeatable).")
@click.option("--k", "ks", callback=_ks, metavar="K",
              help="k of pass@k (one k: a paired comparison is at one k).  [default: the largest "
              "common repeat count]")
@reading_and_output_options("PNG: group × metric heatmap of NEW - BASE.")
def compare(base, new, by_fields, ks, reading: Reading, output: Output, skip):
    """Paired comparison of NEW against BASE (attempt JSONL files) on their common tasks.

    Δpass@1 is the difference of the pooled rates (successes / clean attempts, as in
    summary; the task mean beside it) with the paired standard error over tasks and a t
    interval; p_new_better = F_t(Δ/SE), the probability that NEW is better under a flat
    prior. Also pass@k, pass^k and observed k/k with intervals of their Δ, per-task
    correlation and the tasks gained and lost. See docs/evalstats.md.

    \b
    Example (from the repository root):
      evalstats compare schemas/examples/attempt.json schemas/examples/attempt.json
      evalstats compare --by domain --plot delta.png base.jsonl new.jsonl | jq .pass_at_1
    """
    if base == "-" and new == "-":
        raise click.UsageError("only one of BASE and NEW can be stdin (-)")
    if ks and len(ks) > 1:
        raise click.UsageError(f"--k {','.join(map(str, ks))}: compare reports pass@k at one k")
    tasks = _read_tasks(reading.tasks_file, skip) if reading.tasks_file else None
    views = [_View(_tally([path], list(by_fields), {}, None, skip, reading), tasks, None,
                   reading.estimand) for path in (base, new)]
    try:
        report = compare_runs(views[0].overall, views[1].overall, ks[0] if ks else None,
                              reading.estimand)
        for field in by_fields:
            b, n = (v.groups(field) for v in views)
            report[f"by_{field}"] = {name: compare_runs(b[name], n[name], report["pass_at_k"]["k"],
                                                        reading.estimand)
                                     for name in sorted(set(b) & set(n))}
    except M.KTooLarge as e:
        raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean attempt(s) in one "
                            f"of the runs; use k <= {e.n}", ExitCode.USAGE) from None
    warn_mixed_prompting(base, new)
    _write(report, output.fmt, render.compare_table)
    if output.plot_file:
        render.plot_compare(report, output.plot_file)


def _tally(paths, fields, prices, grid, skip, reading: Reading) -> T.Tally:
    """The attempts in `paths`, folded (in forked readers for big files) into one Tally; two
    clean records of one key are an input error unless --duplicates keeps one."""
    tally = T.tally_fn(fields, prices, grid)
    return fold_attempts(paths, tally, T.merge, duplicates=reading.duplicates, tool="evalstats",
                         skip=skip, workers=reading.workers, struct=tally.struct,
                         repeats=T.Tally.repeated)


main = run(cli)

if __name__ == "__main__":
    sys.exit(main())
