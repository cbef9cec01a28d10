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
from endstate.evalstats.options import (
    Reading,
    check_cluster,
    cluster_option,
    duplicates_option,
    ks_option,
    price_option,
    reading_options,
    task_file_option,
    workers_option,
)
from endstate.evalstats.study import (
    Study,
    compare_files,
    read_tasks,
    tally_files,
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
    study = Study(tally, tasks, None, reading.estimand)
    checks = outcomes = None
    if graded_files:
        checks, seen, outcomes = TT.failed_checks(list(graded_files), skip, reading.workers)
        stray = TT.unmatched(tally, seen)
        if stray:
            click.echo(f"evalstats: {stray} clean graded episode(s) match no attempt's (policy, "
                       "task_id): their checks are not counted", err=True)
    return tally, TT.task_tally(tally, study.property("domain"), checks, top, outcomes), \
        checks is not None


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
    labels: tuple[tuple[str, str], ...]
    task_ids: tuple[str, ...]


def parse_labels(ctx, param, values) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        path, sep, name = value.rpartition("=")
        if not sep or not path or not name.strip():
            raise click.BadParameter(f"{value!r}: expected PATH=NAME, a model as the attempts "
                                     "record it (a checkpoint's path) or an attempt file, and "
                                     "the name the page gives it, e.g. out/grpo/checkpoints/"
                                     "step-000050/hf=trained")
        pairs.append((path, name.strip()))
    return tuple(pairs)


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
@ks_option
@cluster_option
@price_option
@top_option
@click.option("--label", "labels", multiple=True, callback=parse_labels, metavar="PATH=NAME",
              help="Show a policy under NAME: PATH is its model as the attempts record it (a "
              "checkpoint's path) or an attempt file of that one policy (repeatable).  "
              "[default: a grpo checkpoint's run and step, e.g. `grpo step 50`; else the model]")
@click.option("--task", "task_ids", multiple=True, metavar="ID",
              help="A task the outcome figure draws (repeatable).  [default: the first tasks, "
              "up to 60 bars]")
@reading_options
@bundled("page", PageOptions)
def report(files, page: PageOptions, reading: Reading, skip):
    """One page with a study's tables and figures, from attempt FILES of one or more policies.

    The policies × domains table (best per column bold, second underlined), the summary, the
    comparison of each --compare BASE NEW (with cost per success and per reliable task and the
    % change), the frontier (cost vs pass@1, base → new arrows), the domain heatmaps per
    policy, the outcomes per task (with --graded: the failures split by the checks that failed;
    --task picks the tasks) and the posteriors of each task's success rate; a section without
    data is left out. Every number is formatted from the JSON objects summary, compare and
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
    names = display_names(tally, page.labels, lambda path: _file_policy(tally, path, reading,
                                                                        skip))
    _check_tasks(page.task_ids, records)
    by = ["domain"] if any("by_domain" in g for g in metrics["by_policy"].values()) else []
    comparisons, arrows = [], []
    for base, new in page.pairs:
        ends = [_file_policy(tally, path, reading, skip) for path in (base, new)]
        report = compare_files(base, new, by, None, page.cluster, page.prices, reading, skip)
        comparisons.append((ends[0] or base, ends[1] or new, report))
        if all(ends) and ends[0] != ends[1]:
            arrows.append((ends[0], ends[1]))
    facts = [f"{len(paths)} attempt file(s): {', '.join(paths)}",
             f"{metrics['overall']['tasks']} tasks, {len(G.policy_labels(tally))} policies, "
             f"estimand {reading.estimand}" + (f", clustered by {page.cluster}" if page.cluster
                                                else ""),
             *(f"{name}: {label}" for label, name in names.items() if name != label)]
    built = P.build(metrics, comparisons, records, arrows, facts, graded, names, page.task_ids)
    text = P.html(built) if page.page_format == "html" else P.markdown(built)
    try:
        Path(page.out_file).write_text(text, encoding="utf-8")
    except OSError as e:  # a full disk has no file name: the exit-5 handler said "stdout"
        raise FileError(f"{page.out_file}: cannot write: {e.strerror or e}") from None
    click.echo(f"evalstats report: wrote {page.out_file}", err=True)


def _metrics(paths, tasks, page: PageOptions, reading: Reading, skip) -> dict:
    """summary's object by policy, and by policy × domain when the records have a domain."""
    fields = ["policy", "domain", *([page.cluster] if page.cluster else [])]
    study = Study(tally_files(paths, fields, page.prices, None, skip, reading), tasks, page.cluster,
                reading.estimand)
    return study.by_policy(page.ks)


def _file_policy(tally, path: str, reading: Reading, skip) -> str | None:
    """The label of the one policy an attempt file holds (None: several, or none)."""
    own = tally_files([path], [], {}, None, skip, reading).policies
    if len(own) != 1:
        return None
    return G.policy_labels(tally)[tally.policies[next(iter(own))]]


def display_names(tally, labels: tuple[tuple[str, str], ...], file_policy) -> dict[str, str]:
    """policy label -> the name the page shows: a --label's NAME (its PATH a model as recorded,
    a policy label, or an attempt file of one policy), else default_name; a default two
    policies share gives way to their labels."""
    policy_labels = G.policy_labels(tally)
    models = {policy_labels[pid]: key[0] for key, pid in tally.policies.items()}
    names: dict[str, str] = {}
    for depth in range(1, 6):  # the run's folder, then its parents, until no two read alike
        tried = {label: default_name(label, model, depth) for label, model in models.items()
                 if label not in names}
        taken = [*names.values(), *tried.values()]
        names.update({label: name for label, name in tried.items() if taken.count(name) == 1})
    names = {label: names.get(label, label) for label in models}
    for path, name in labels:
        hits = [label for label, model in models.items() if path in (label, model)]
        if not hits and (one := file_policy(path) if Path(path).is_file() else None):
            hits = [one]
        if not hits:
            raise EndstateError(f"--label {path}={name}: no policy's model is {path!r}, and it "
                                "is no attempt file of one policy; the models are "
                                + ", ".join(sorted(map(str, set(models.values())))),
                                ExitCode.USAGE)
        for label in hits:
            suffix = label[len(str(models[label])):] if label.startswith(str(models[label])) \
                else ""
            names[label] = name + suffix
    return names


def default_name(label: str, model, depth: int = 1) -> str:
    """A grpo checkpoint (…/RUN/checkpoints/step-N/hf) is `RUN step N` (`depth` folders of its
    run's path, and the label's prompting settings, if any); any other model keeps its label."""
    parts = str(model).rstrip("/").split("/")
    if len(parts) >= 4 and parts[-1] == "hf" and parts[-3] == "checkpoints" and \
            parts[-2].startswith("step-") and parts[-2][5:].isdigit():
        run = "/".join(parts[max(len(parts) - 3 - depth, 0):-3])
        return f"{run} step {int(parts[-2][5:])}" + label[len(str(model)):]
    return label


def _check_tasks(task_ids, records) -> None:
    known = {r["task_id"] for r in records}
    for task_id in task_ids:
        if task_id not in known:
            raise EndstateError(f"--task {task_id}: no attempt of it in the files; e.g. "
                                + ", ".join(sorted(known)[:3]), ExitCode.USAGE)
