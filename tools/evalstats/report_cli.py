"""evalstats tally and evalstats report: the per-task tally, and the study's page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options
from endstate.core.console import stdio
from endstate.core.errors import EndstateError, ExitCode, FileError
from endstate.core.records.jsonl import write_jsonl
from endstate.evalstats import groups as G
from endstate.evalstats import render
from endstate.evalstats import task_tally as TT
from endstate.evalstats.intervals import POPULATION
from endstate.evalstats.view import (
    Reading,
    View,
    check_cluster,
    cluster_option,
    compare_files,
    duplicates_option,
    parse_ks,
    price_option,
    read_tasks,
    reading_options,
    tally_files,
    task_file_option,
    workers_option,
)

graded_option = click.option(
    "--graded", "graded_files", multiple=True, type=click.Path(dir_okay=False, allow_dash=True),
    help="Graded episodes of these attempts (probe --episodes, or rollout | grade): the checks "
    "that failed come from here (repeatable). Attempts carry no checks.")
top_option = click.option("--top", type=ranges.count(1, 1000), default=3, show_default=True,
                          help="Checks listed per task: those that failed most.")


def _tally(files, graded_files, tasks_file, reading: Reading, skip, top: int):
    """(the Tally of the attempts, the tally records, whether checks were read)."""
    tasks = read_tasks(tasks_file, skip) if tasks_file else None
    tally = tally_files(list(files), ["domain"], {}, None, skip, reading)
    view = View(tally, tasks, None, reading.estimand)
    checks = None
    if graded_files:
        checks, seen = TT.failed_checks(list(graded_files), skip, reading.workers)
        stray = TT.unmatched(tally, seen)
        if stray:
            click.echo(f"evalstats: {stray} clean graded episode(s) match no attempt's (policy, "
                       "task_id): their checks are not counted", err=True)
    return tally, TT.task_tally(tally, view.property("domain"), checks, top), checks is not None


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@graded_option
@top_option
@click.option("--format", "fmt", type=click.Choice(["json", "table", "markdown"]), default="json",
              show_default=True, help="json: one record per (policy, task), JSONL; table or "
              "markdown: for people.")
@task_file_option
@duplicates_option
@workers_option
@common_options(skip_invalid=True)
def tally(files, graded_files, top, fmt, tasks_file, duplicates, workers, skip):
    """Per policy and task: successes / clean attempts, and the checks that failed most.

    FILES are attempt JSONL (`-` or none: stdin). Attempts carry the reward, not the checks:
    give the graded episodes with --graded (probe --episodes writes them) to list, per task,
    the checks that failed most with their counts; without them failed_checks is null.

    \b
    Example (from the repository root):
      evalstats tally --format table schemas/examples/attempt.json
      evalstats tally --graded eval_episodes.jsonl eval.jsonl | jq 'select(.successes < .n)'
    """
    reading = Reading(tasks_file, POPULATION, duplicates, workers)
    _, records, _ = _tally(files, graded_files, tasks_file, reading, skip, top)
    if fmt == "json":
        write_jsonl(records)
    else:
        stdio.echo(render.tally_table(records, style=fmt))


@dataclass
class PageOptions:
    """evalstats report's flags: where the page goes, in what format, and what it compares."""

    out_file: str
    page_format: str
    pairs: tuple[tuple[str, str], ...]
    graded_files: tuple[str, ...]
    ks: list[int] | None
    cluster: str | None
    prices: dict
    top: int


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--out", "out_file", required=True, type=click.Path(dir_okay=False),
              help="Where the page goes (report.html, or report.md with --format markdown).")
@click.option("--format", "page_format", type=click.Choice(["html", "markdown"]), default="html",
              show_default=True, help="One self-contained page: HTML, or Markdown (images "
              "inline as data: URIs either way).")
@click.option("--compare", "pairs", nargs=2, multiple=True, metavar="BASE NEW",
              type=click.Path(dir_okay=False),
              help="Attempt files of a base and a new run (trained): their paired comparison, "
              "and an arrow from BASE to NEW on the frontier (repeatable; both join FILES).")
@graded_option
@click.option("--k", "ks", callback=parse_ks, metavar="K,K,...",
              help="k values of pass@k and pass^k.  [default: 1, 5 and the largest common "
              "repeat count]")
@cluster_option
@price_option
@top_option
@reading_options
@bundled("page", PageOptions)
def report(files, page: PageOptions, reading: Reading, skip):
    """One page with a study's tables and figures, from attempt FILES of one or more policies.

    The policies × domains table (best per column bold, second underlined), the summary, the
    comparison of each --compare BASE NEW (with cost per success and per reliable task and the
    % change), the frontier (cost vs pass@1, base → new arrows), the domain heatmaps, the
    per-task tally (with --graded: the checks that failed most) and the posteriors of each
    task's success rate. Every number is formatted from the JSON objects summary, compare and
    tally print; the page carries them. See docs/evalstats.md.

    \b
    Example (from the repository root):
      evalstats report -o report.html schemas/examples/attempt.json
      evalstats report --compare base.jsonl trained.jsonl --graded episodes.jsonl -o report.html
    """
    from endstate.evalstats import report as P

    check_cluster(page.cluster, reading.estimand)
    paths = list(dict.fromkeys([*files, *(p for pair in page.pairs for p in pair)]))
    if not paths:
        raise click.UsageError("give attempt FILES, or --compare BASE NEW")
    tasks = read_tasks(reading.tasks_file, skip) if reading.tasks_file else None
    tally, records, graded = _tally(paths, page.graded_files, reading.tasks_file, reading, skip,
                                    page.top)
    if not tally.cells:
        raise EndstateError(f"evalstats report: no attempt records in {', '.join(paths)}; "
                            "give the attempt files probe wrote", ExitCode.USAGE)
    metrics = _metrics(paths, tasks, page, reading, skip)
    comparisons, arrows = [], []
    for base, new in page.pairs:
        by = ["domain"] if "by_domain" in metrics else []
        comparisons.append((base, new, compare_files(base, new, by, None, page.cluster,
                                                     page.prices, reading, skip)))
        arrow = _arrow(tally, base, new, reading, skip)
        if arrow:
            arrows.append(arrow)
    facts = [f"{len(paths)} attempt file(s): {', '.join(paths)}",
             f"{metrics['overall']['tasks']} tasks, {len(G.policy_labels(tally))} policies, "
             f"estimand {reading.estimand}" + (f", clustered by {page.cluster}" if page.cluster
                                                else "")]
    built = P.build(metrics, comparisons, records, arrows, facts, graded)
    text = P.html(built) if page.page_format == "html" else P.markdown(built)
    try:
        Path(page.out_file).write_text(text, encoding="utf-8")
    except OSError as e:  # a full disk has no file name: the exit-5 handler said "stdout"
        raise FileError(f"{page.out_file}: cannot write: {e.strerror or e}") from None
    click.echo(f"evalstats report: wrote {page.out_file}", err=True)


def _metrics(paths, tasks, page: PageOptions, reading: Reading, skip) -> dict:
    """summary's object by policy, and by policy × domain when the records have a domain."""
    fields = ["policy", "domain", *([page.cluster] if page.cluster else [])]
    view = View(tally_files(paths, fields, page.prices, None, skip, reading), tasks, page.cluster,
                reading.estimand)
    try:
        G.check_present(view.tally, ["domain"], tasks)
        by = ["policy", "domain"]
    except G.FieldAbsent:
        by = ["policy"]
    return view.report(by, page.ks)


def _arrow(tally, base: str, new: str, reading: Reading, skip) -> tuple[str, str] | None:
    """(BASE's policy label, NEW's) in the page's labels, when each file holds one policy."""
    labels = G.policy_labels(tally)
    number = tally.policies
    ends = []
    for path in (base, new):
        own = tally_files([path], [], {}, None, skip, reading).policies
        if len(own) != 1:
            return None
        ends.append(labels[number[next(iter(own))]])
    return (ends[0], ends[1]) if ends[0] != ends[1] else None
