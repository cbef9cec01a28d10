"""evalstats: reliability statistics of attempt records, and paired comparison of two runs."""

from __future__ import annotations

import sys

import click

from endstate.core import stdio
from endstate.core.cli import common_options, parse_prices, run, tool_group
from endstate.core.errors import EndstateError, ExitCode
from endstate.core.records import SkipLog, fold_jsonl, read_jsonl, write_jsonl
from endstate.evalstats import metrics as M
from endstate.evalstats import render
from endstate.evalstats.compare import compare as compare_runs


def _ks(ctx, param, value):
    if value is None:
        return None
    try:
        ks = sorted({int(x) for x in value.split(",")})
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from None
    if ks[0] < 1:
        raise click.BadParameter("k values must be >= 1, e.g. 1,5,20")
    return ks


format_option = click.option("--format", "fmt", type=click.Choice(["json", "table", "markdown"]),
                             default="json", show_default=True,
                             help="json: one object (jq-friendly); table or markdown: for people.")
workers_option = click.option("--procs", "workers", type=click.IntRange(1),
                              help="Processes that read big files.  [default: the CPU count]")


def output_options(plot_help: str):
    """--format, --plot, --procs and the common reader flags, alike in summary and compare."""
    def decorate(fn):
        fn = workers_option(common_options(skip_invalid=True)(fn))
        plot = click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help=plot_help)
        return format_option(plot(fn))

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


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD",
              help="Also report per value of this attempt field, as by_FIELD (repeatable).")
@click.option("--k", "ks", callback=_ks, metavar="K,K,...",
              help="k values of pass@k and pass^k.  [default: 1, 5 and the largest common "
              "repeat count]")
@click.option("--cluster", metavar="FIELD",
              help="Cluster-robust standard error over the values of this field.")
@click.option("--price", "prices", multiple=True, callback=parse_prices, metavar="MODEL=IN,OUT",
              help="USD per million agent prompt,completion tokens of MODEL; overrides cost_usd "
              "of its attempts (repeatable).")
@click.option("--expect-tasks", type=click.Path(dir_okay=False, allow_dash=True),
              help="Task records whose every key must be present (coverage gate).")
@click.option("--expect-repeats", type=click.IntRange(1), help="Attempts 0..N-1 expected per task.")
@click.option("--allow-incomplete", is_flag=True,
              help="Report even when the coverage gate fails (exit 0; the listing still goes to "
              "stderr).")
@output_options("PNG: cost per success against pass@1 by model, and a domain × metric heatmap.")
def summary(files, by_fields, ks, cluster, prices, expect_tasks, expect_repeats, allow_incomplete,
            fmt, plot_file, workers, skip_invalid):
    """Metrics of the attempts in FILES (attempt JSONL; `-` or none: stdin).

    pass@1 = successes / clean attempts; its standard error is computed over tasks.
    pass@k and pass^k are the unbiased estimators, per task then averaged; observed k/k
    counts the tasks whose every clean attempt succeeded. System errors are excluded from
    the rates and reported; their cost counts. See docs/evalstats.md.

    \b
    Coverage gate: with --expect-tasks and --expect-repeats, every task × attempt key must
    be exactly one clean record; the others are listed on stderr (missing, duplicate,
    system_error) and the exit status is 3.
    \b
    Examples (from the repository root):
      evalstats schemas/examples/attempt.json | jq .overall.pass_at_1
      evalstats --by domain --k 1,5,20 --format table eval.jsonl
      evalstats --expect-tasks tasks/bench/retail.jsonl --expect-repeats 20 eval.jsonl > metrics.json
    """
    if (expect_tasks is None) != (expect_repeats is None):
        raise click.UsageError("--expect-tasks and --expect-repeats go together, e.g. "
                               "--expect-tasks bench.jsonl --expect-repeats 20")
    skip = SkipLog() if skip_invalid else None
    expected = ([t["id"] for _, t in read_jsonl([expect_tasks], "task", skip=skip)]
                if expect_tasks else None)
    fields = list(dict.fromkeys([*by_fields, *([cluster] if cluster else []),
                                 *(["model", "domain"] if plot_file else [])]))
    tally = _tally(list(files), fields, prices, expected is not None, skip, workers)
    if expected is not None:
        _gate(tally, expected, expect_repeats, allow_incomplete)

    overall = M.group_tasks(tally).get("overall", {})
    by = {f: M.group_tasks(tally, f) for f in by_fields}
    if ks is None:
        ks = M.default_ks(M.common_repeats([overall, *(g for b in by.values() for g in b.values())]))
    clusters = M.task_field(tally, cluster) if cluster else None
    try:
        report = {"overall": M.metrics(overall, ks, clusters)}
        for f, groups in by.items():
            report[f"by_{f}"] = {name: M.metrics(tasks, ks, clusters)
                                 for name, tasks in sorted(groups.items())}
    except M.KTooLarge as e:
        raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean attempt(s); "
                            f"use k <= {e.n}, or re-run its missing attempts", ExitCode.USAGE) from None
    cost = report["overall"]["cost"]
    recorded = report["overall"]["attempts"] + report["overall"]["system_errors"]
    if 0 < cost["priced_attempts"] < recorded:
        click.echo(f"evalstats: only {cost['priced_attempts']} of {recorded} attempts have a cost "
                   "(cost_usd, or --price for their model); the costs cover those only", err=True)
    _write(report, fmt, render.metrics_table)
    if plot_file:
        models = {name: M.metrics(tasks, [], None)
                  for name, tasks in M.group_tasks(tally, "model").items()}
        domains = report.get("by_domain") or {
            name: M.metrics(tasks, ks, None) for name, tasks in M.group_tasks(tally, "domain").items()}
        render.plot_metrics({**report, "by_domain": dict(sorted(domains.items()))}, models,
                            plot_file)
    if skip:
        skip.report()


def _gate(tally: M.Tally, expected: list[str], repeats: int, allow_incomplete: bool) -> None:
    problems = M.coverage(tally.keys, expected, repeats)
    bad = [p for p in problems if p.kind != M.UNEXPECTED]
    total = len(set(expected)) * repeats
    if bad:
        kinds = {k: sum(1 for p in bad if p.kind == k) for k in (M.MISSING_KEY, M.DUPLICATE,
                                                               M.SYSTEM_ERROR)}
        click.echo(f"coverage: {len(bad)} of {total} task × attempt keys are not exactly one clean "
                   f"record ({', '.join(f'{k} {v}' for k, v in kinds.items())}); re-run them:",
                   err=True)
    extra = [p for p in problems if p.kind == M.UNEXPECTED]
    if extra:
        click.echo(f"coverage: {len(extra)} recorded key(s) are not expected (task not in the "
                   f"expected tasks, or attempt >= {repeats}):", err=True)
    for kind, task_id, attempt, count in bad + extra:
        tail = f"\t{count} records" if kind in (M.DUPLICATE, M.UNEXPECTED) and count > 1 else ""
        click.echo(f"{kind}\t{task_id}\t{attempt}{tail}", err=True)
    if bad and not allow_incomplete:
        raise EndstateError(f"coverage gate failed: {len(bad)} key(s) to re-run (listed above); "
                            "pass --allow-incomplete to report anyway", ExitCode.INCOMPLETE)


def _write(report: dict, fmt: str, table) -> None:
    if fmt == "json":
        write_jsonl([report])
    else:
        stdio.echo(table(report, markdown=fmt == "markdown"))


@cli.command()
@click.argument("base", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("new", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD",
              help="Also compare per value of this attempt field, as by_FIELD (repeatable).")
@click.option("--k", "ks", callback=_ks, metavar="K",
              help="k of pass@k (one k: a paired comparison is at one k).  [default: the largest "
              "common repeat count]")
@output_options("PNG: group × metric heatmap of NEW - BASE.")
def compare(base, new, by_fields, ks, fmt, plot_file, workers, skip_invalid):
    """Paired comparison of NEW against BASE (attempt JSONL files) on their common tasks.

    Δpass@1 is the mean per-task difference of success rates with the paired standard
    error; p_new_better = Φ(Δ/SE), the probability that NEW is better under a normal
    approximation with a flat prior. Also pass@k, observed k/k, per-task correlation and
    the tasks gained and lost. See docs/evalstats.md.

    \b
    Example (from the repository root):
      evalstats compare schemas/examples/attempt.json schemas/examples/attempt.json
      evalstats compare --by domain --plot delta.png base.jsonl new.jsonl | jq .pass_at_1
    """
    if base == "-" and new == "-":
        raise click.UsageError("only one of BASE and NEW can be stdin (-)")
    if ks and len(ks) > 1:
        raise click.UsageError(f"--k {','.join(map(str, ks))}: compare reports pass@k at one k")
    skip = SkipLog() if skip_invalid else None
    sides = [_tally([path], list(by_fields), {}, False, skip, workers) for path in (base, new)]
    try:
        report = compare_runs(*(M.group_tasks(t).get("overall", {}) for t in sides),
                              ks[0] if ks else None)
        for field in by_fields:
            b, n = (M.group_tasks(t, field) for t in sides)
            report[f"by_{field}"] = {name: compare_runs(b[name], n[name], report["pass_at_k"]["k"])
                                     for name in sorted(set(b) & set(n))}
    except M.KTooLarge as e:
        raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean attempt(s) in one "
                            f"of the runs; use k <= {e.n}", ExitCode.USAGE) from None
    _write(report, fmt, render.compare_table)
    if plot_file:
        render.plot_compare(report, plot_file)
    if skip:
        skip.report()


def _tally(paths, fields, prices, with_keys, skip, workers) -> M.Tally:
    """The attempts in `paths`, folded (in forked readers for big files) into one Tally."""
    tally = M.tally_fn(fields, prices, with_keys)
    return fold_jsonl(paths, "attempt", tally, M.merge, skip=skip, workers=workers,
                      struct=tally.struct)


main = run(cli)

if __name__ == "__main__":
    sys.exit(main())
