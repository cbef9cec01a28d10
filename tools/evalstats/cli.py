"""evalstats: reliability statistics of attempt records, and paired comparison of two runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, run, tool_group
from endstate.core.errors import EndstateError, ExitCode
from endstate.evalstats import coverage as C
from endstate.evalstats import render
from endstate.evalstats import tally as T
from endstate.evalstats.options import (
    Output,
    Reading,
    check_cluster,
    cluster_option,
    ks_option,
    parse_ks,
    price_option,
    reading_and_output_options,
)
from endstate.evalstats.prompting_check import warn_mixed_prompting
from endstate.evalstats.report_cli import report, tally
from endstate.evalstats.study import (
    Study,
    compare_files,
    read_tasks,
    tally_files,
    warn_cost,
    write_output,
)


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


def parse_arrows(ctx, param, values) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        base, sep, new = value.partition("=")
        if not sep or not base or not new:
            raise click.BadParameter(f"{value!r}: expected BASE=NEW, two policies as by_policy "
                                     "names them, e.g. SmolLM2-135M-Instruct=out/step-50/hf")
        pairs.append((base, new))
    return pairs


@tool_group(default="summary")
def cli():
    """Reliability statistics of evaluation attempts.

    \b
      evalstats [OPTIONS] FILES...       metrics of the attempts (the `summary` command)
      evalstats compare BASE NEW         paired comparison of two runs
      evalstats tally FILES...           successes / n per task (and the checks that failed)
      evalstats report FILES... -o PAGE  the tables and figures of a study, on one page
    \b
    Example (from the repository root):
      evalstats --format table schemas/examples/attempt.json
    """


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD", callback=ranges.field_names,
              help="Also report per value of this field, as by_FIELD (repeatable; `policy`: "
              "model and prompting). Two: each group of the first also holds by_SECOND, and "
              "the table is first × second.")
@ks_option
@cluster_option
@price_option
@click.option("--expect-tasks", type=click.Path(dir_okay=False, allow_dash=True),
              help="Task records whose every key must be present (coverage gate).")
@click.option("--expect-repeats", type=ranges.REPEATS, help="Attempts 0..N-1 expected per task.")
@click.option("--allow-incomplete", is_flag=True,
              help="Report even when the coverage gate fails (exit 0; the listing still goes to "
              "stderr).")
@click.option("--strict", is_flag=True,
              help="Coverage gate: unexpected keys fail it too (exit 3), not only missing ones.")
@click.option("--arrow", "arrows", multiple=True, callback=parse_arrows, metavar="BASE=NEW",
              help="--plot: an arrow from policy BASE to policy NEW on the frontier, named as "
              "by_policy names them (repeatable).")
@reading_and_output_options("PNG: cost per success against pass@1 by policy, and a domain × "
                            "metric heatmap per policy.")
@bundled("gate", Gate)
def summary(files, by_fields, ks, cluster, prices, arrows, gate: Gate, reading: Reading,
            output: Output, skip):
    """Metrics of the attempts in FILES (attempt JSONL; `-` or none: stdin).

    pass@1 = successes / clean attempts (pooled) and the task mean, each with its own SE
    (over tasks) and 95% interval; pass@k and pass^k are the unbiased estimators, per task
    then averaged; observed k/k counts the tasks whose every clean attempt succeeded. System
    errors are excluded from the rates and reported; their cost counts. Attempts are keyed by
    (policy, task_id, attempt): several models' files can be read at once. See
    docs/evalstats.md.

    \b
    Coverage gate: with --expect-tasks and --expect-repeats, every task × attempt key must
    have a clean record, for each policy; the others are listed on stderr (missing,
    system_error) and the exit status is 3. Unexpected keys are listed and left out (with
    --strict they fail it too).
    \b
    Examples (from the repository root):
      evalstats schemas/examples/attempt.json | jq .overall.pass_at_1
      cat base.jsonl trained.jsonl | evalstats --by model --by domain --format markdown
      evalstats --expect-tasks tasks/bench/retail.jsonl --expect-repeats 20 eval.jsonl > metrics.json
    """
    check_cluster(cluster, reading.estimand)
    expected = read_tasks(gate.expect_tasks, skip) if gate.expect_tasks else None
    tasks = read_tasks(reading.tasks_file, skip) if reading.tasks_file else expected
    fields = list(dict.fromkeys([*by_fields, *([cluster] if cluster else []),
                                 *(["domain"] if output.plot_file else [])]))
    grid = T.Grid(frozenset(expected), gate.expect_repeats) if expected is not None else None
    tally = tally_files(list(files), fields, prices, grid, skip, reading)
    if grid is not None:
        _gate(tally, list(expected), gate.expect_repeats, gate.allow_incomplete, gate.strict)
    study = Study(tally, tasks, cluster, reading.estimand)
    study.policy_note(by_fields)
    report = study.report(list(by_fields), ks)
    warn_cost(report["overall"]["cost"])
    write_output(report, output.fmt, render.metrics_table)
    if output.plot_file:
        from endstate.evalstats import figures

        figures.plot_metrics(study.by_policy(ks), output.plot_file, arrows)


def _gate(tally: T.Tally, expected: list[str], repeats: int, allow_incomplete: bool,
          strict: bool) -> None:
    problems = C.coverage(tally.keys, expected, repeats)
    bad = [p for p in problems if p.kind != C.UNEXPECTED]
    extra = [p for p in problems if p.kind == C.UNEXPECTED]
    policies = {p for *_, p in tally.keys.records}
    total = len(set(expected)) * repeats * max(len(policies), 1)
    if bad:
        kinds = {k: sum(1 for p in bad if p.kind == k) for k in (C.MISSING_KEY, C.SYSTEM_ERROR)}
        click.echo(f"coverage: {len(bad)} of {total} task × attempt keys have no clean record "
                   f"({', '.join(f'{k} {v}' for k, v in kinds.items())}); re-run them:", err=True)
    if extra:
        click.echo(f"coverage: {len(extra)} recorded key(s) are not expected (task not in the "
                   f"expected tasks, or attempt >= {repeats}); left out of the metrics:", err=True)
    for kind, task_id, attempt, count, policy in bad + extra:
        tail = f"\t{count} records" if kind == C.UNEXPECTED and count > 1 else ""
        model = f"\tmodel {policy[0]}" if len(policies) > 1 and policy is not None else ""
        click.echo(f"{kind}\t{task_id}\t{attempt}{tail}{model}", err=True)
    failed = len(bad) + (len(extra) if strict else 0)
    if failed and not allow_incomplete:
        what = "to re-run" if not strict else "missing, hit by system errors or unexpected"
        raise EndstateError(f"coverage gate failed: {failed} key(s) {what} (listed above); "
                            "pass --allow-incomplete to report anyway", ExitCode.INCOMPLETE)


@cli.command()
@click.argument("base", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("new", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--by", "by_fields", multiple=True, metavar="FIELD", callback=ranges.field_names,
              help="Also compare per value of this field, as by_FIELD (repeatable).")
@click.option("--k", "ks", callback=parse_ks, metavar="K",
              help="k of pass@k (one k: a paired comparison is at one k).  [default: the largest "
              "common repeat count]")
@cluster_option
@price_option
@reading_and_output_options("PNG: group × metric heatmap of NEW - BASE.")
def compare(base, new, by_fields, ks, cluster, prices, reading: Reading, output: Output, skip):
    """Paired comparison of NEW against BASE (attempt JSONL files) on their common tasks.

    Δpass@1 is the difference of the pooled rates (successes / clean attempts, as in
    summary; the task mean beside it) with the paired standard error over tasks (over
    clusters with --cluster) and a t interval; p_new_better = F_t(Δ/SE), the probability that
    NEW is better under a flat prior. Also pass@k, pass^k and observed k/k with intervals of
    their Δ, per-task correlation, the tasks gained and lost, and the cost per success and
    per reliable task of each run with the % change. See docs/evalstats.md.

    \b
    Example (from the repository root):
      evalstats compare schemas/examples/attempt.json schemas/examples/attempt.json
      evalstats compare --by domain --plot delta.png base.jsonl new.jsonl | jq .pass_at_1
    """
    if base == "-" and new == "-":
        raise click.UsageError("only one of BASE and NEW can be stdin (-)")
    if ks and len(ks) > 1:
        raise click.UsageError(f"--k {','.join(map(str, ks))}: compare reports pass@k at one k")
    check_cluster(cluster, reading.estimand)
    report = compare_files(base, new, list(by_fields), ks[0] if ks else None, cluster, prices,
                           reading, skip)
    warn_mixed_prompting(base, new)
    write_output(report, output.fmt, render.compare_table)
    if output.plot_file:
        from endstate.evalstats import figures

        figures.plot_compare(report, output.plot_file)


cli.add_command(tally)
cli.add_command(report)

main = run(cli, collect_cycles=False)

if __name__ == "__main__":
    sys.exit(main())
