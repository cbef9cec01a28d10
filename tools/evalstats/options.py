"""evalstats' flags that several commands share, and the settings objects they fill (how the
attempts are read, how the result is written)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options, parse_prices
from endstate.core.records.keys import MODES
from endstate.evalstats import groups as G
from endstate.evalstats import intervals as I


def parse_ks(ctx, param, value):
    if value is None:
        return None
    try:
        ks = sorted({int(x) for x in value.split(",")})
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from None
    if ks[0] < 1 or ks[-1] > ranges.MAX_REPEATS:
        raise click.BadParameter(f"k values must be from 1 to {ranges.MAX_REPEATS}, e.g. 1,5,20")
    return ks


ks_option = click.option("--k", "ks", callback=parse_ks, metavar="K,K,...",
                         help="k values of pass@k and pass^k.  [default: 1, 5 and the largest "
                         "common repeat count]")
format_option = click.option("--format", "fmt", type=click.Choice(["json", "table", "markdown"]),
                             default="json", show_default=True,
                             help="json: one object (jq-friendly); table or markdown: for people.")
workers_option = click.option("--procs", "workers", type=ranges.PROCS,
                              help="Processes that read big files.  [default: the CPU count]")
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
    help="Two clean attempt records with one (policy, task_id, attempt): an input error, or "
    "keep the first or the last read.")
price_option = click.option(
    "--price", "prices", multiple=True, callback=parse_prices, metavar="MODEL=IN,OUT",
    help="USD per million agent prompt,completion tokens of MODEL; overrides cost_usd of its "
    "attempts (repeatable).")


def _cluster_field(ctx, param, value):
    value = ranges.field_names(ctx, param, value)
    if value == G.POLICY:  # a cluster is a set of tasks; the policy varies within one task
        raise click.BadParameter("policy is not a field of a task: cluster by a task field "
                                 "(template, domain, ...), and compare policies with --by policy "
                                 "or evalstats compare", ctx, param)
    return value


cluster_option = click.option(
    "--cluster", metavar="FIELD", callback=_cluster_field,
    help="Cluster-robust (CR1) standard errors over the values of this task field "
    "(population estimand).")


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


def reading_options(fn):
    """--tasks, --estimand, --duplicates, --procs (as one `reading`) and --skip-invalid."""
    fn = bundled("reading", Reading)(fn)
    fn = workers_option(common_options(skip_invalid=True)(fn))
    return task_file_option(estimand_option(duplicates_option(fn)))


def reading_and_output_options(plot_help: str):
    """reading_options, and --format and --plot (as one `output`), alike in summary and
    compare."""
    def decorate(fn):
        fn = reading_options(bundled("output", Output)(fn))
        plot = click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
                            callback=ranges.png, help=plot_help)
        return format_option(plot(fn))

    return decorate


def check_cluster(cluster: str | None, estimand: str) -> None:
    if cluster and estimand == I.BENCHMARK:
        raise click.UsageError("--cluster describes how the tasks were drawn, which the benchmark "
                               "estimand holds fixed (only the attempts are random): drop "
                               "--cluster, or use --estimand population")
