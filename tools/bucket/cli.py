"""bucket: the difficulty of each task from its attempts, and the training pool it implies."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import click

from endstate.bucket import pool as P
from endstate.bucket.report import plot as plot_histogram
from endstate.bucket.report import plot_posteriors, table
from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options, env_domain_dirs, run, tool_command
from endstate.core.env.folders import suite_files
from endstate.core.episode.leak import refuse_held_out
from endstate.core.episode.plan import read_tasks
from endstate.core.records.jsonl import read_jsonl, write_jsonl
from endstate.core.records.keys import MODES, fold_attempts
from endstate.core.records.structs import Attempt
from endstate.core.stats.bands import Bands


def _floats(count: int | None):
    def parse(ctx, param, value):
        if value is None:
            return None
        try:
            numbers = tuple(float(x) for x in value.split(","))
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers") from None
        if not all(math.isfinite(x) for x in numbers):  # nan passes every comparison after this
            raise click.BadParameter(f"{value!r}: every number must be finite")
        if count is not None and len(numbers) != count:
            raise click.BadParameter(f"expected {count} numbers separated by a comma, got {value!r}")
        return numbers
    return parse


MAX_PRIOR = 1e4  # pseudo-counts of the Beta prior


def _names(ctx, param, value):
    return None if value is None else tuple(x.strip() for x in value.split(",") if x.strip())


@dataclass
class BucketOptions:
    """bucket's flags: the difficulty cut, the candidates, the holdout and the outputs."""

    prior: tuple[float, float]
    edges: tuple[float, ...]
    band_names: tuple[str, ...] | None
    keep: tuple[str, ...]
    min_clean_runs: int
    reference_files: tuple[str, ...]
    reference_min_successes: int
    holdout: float | None
    holdout_file: str | None
    seed: int
    exclude_files: tuple[str, ...]
    emit_all: bool
    tasks_file: str | None
    allow_bench: bool
    uncertain: float | None
    keep_if: float | None
    duplicates: str
    report: bool
    plot_file: str | None
    posteriors_file: str | None
    workers: int | None

    def __post_init__(self) -> None:
        if (self.holdout is None) != (self.holdout_file is None):
            raise click.UsageError("--holdout and --holdout-file go together, e.g. "
                                   "--holdout 0.1 --holdout-file val.jsonl")
        if self.uncertain is not None and (self.holdout is not None or self.emit_all):
            raise click.UsageError("--uncertain selects tasks to probe again; it does not combine "
                                   "with --holdout or --all")
        if self.holdout is not None and self.emit_all:
            raise click.UsageError("--holdout splits the kept pool; drop --all")

    def rules(self) -> P.Rules:
        return P.Rules(bands=_bands(self.prior, self.edges, self.band_names, self.keep),
                       keep=frozenset(self.keep), prior=self.prior, min_clean_runs=self.min_clean_runs,
                       reference_min_successes=self.reference_min_successes, keep_if=self.keep_if)


@tool_command
@click.argument("attempts", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--prior", default="0.5,0.5", show_default=True, callback=_floats(2),
              help="A,B of the Beta prior (Jeffreys is 0.5,0.5; uniform is 1,1).")
@click.option("--edges", default="0.08,0.40,0.60,0.90", show_default=True, callback=_floats(None),
              help="Cut points of the success rate between bands, increasing.")
@click.option("--bands", "band_names", callback=_names,
              help="Band names, hardest first; needed when --edges does not give 4 edges. "
              "[default: too_hard,hard,medium,easy,too_easy]")
@click.option("--keep", default="hard,medium,easy", show_default=True, callback=_names,
              help="Bands that go into the pool.")
@click.option("--min-clean-runs", type=ranges.count(0, ranges.MAX_REPEATS), default=4, show_default=True,
              help="Fewer clean runs than this: not kept (reason insufficient_runs).")
@click.option("--reference", "reference_files", multiple=True,
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Attempts of a stronger reference model; tasks it never solved are not kept "
              "(reason unsolved_by_reference). Repeatable.")
@click.option("--reference-min-successes", type=ranges.count(0, ranges.MAX_REPEATS), default=1, show_default=True,
              help="Successes the reference needs on a task for it to be kept.")
@click.option("--holdout", type=ranges.number(0, 1, min_open=True, max_open=True),
              help="Fraction of the kept pool to hold out for validation (needs --holdout-file).")
@click.option("--holdout-file", type=click.Path(dir_okay=False), help="Where the holdout goes.")
@click.option("--seed", type=ranges.SEED, default=0, show_default=True, help="Seed of the holdout split.")
@click.option("--exclude", "exclude_files", multiple=True, type=click.Path(dir_okay=False),
              help="Benchmark task files: candidates with the same id or the same content "
              "fingerprint are not kept (reason benchmark_overlap). Repeatable.")
@click.option("--all", "emit_all", is_flag=True, help="Emit every task, not only the kept ones.")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Candidate task records: emit those tasks with a `difficulty` field instead of "
              "difficulty records (tasks without attempts count as n = 0).")
@click.option("--allow-bench", is_flag=True,
              help="Let --tasks hold tasks of a held-out split (bench, ood); refused otherwise, "
              "naming them.")
@click.option("--uncertain", type=ranges.number(0.5, 1, min_open=True, max_open=True),
              metavar="P", help="Emit only tasks whose keep/drop decision is open: P(kept bands) "
              "strictly between 1-P and P, or too few clean runs (the ones more probes can "
              "settle).")
@click.option("--keep-if", type=ranges.number(0, 1, min_open=True), metavar="Q",
              help="Keep a task when P(kept bands) >= Q, instead of when its most likely band "
              "is kept.")
@click.option("--duplicates", type=click.Choice(MODES), default="error", show_default=True,
              help="Two clean attempt records with one (task_id, attempt): an input error, or "
              "keep the first or the last read.")
@click.option("--report", is_flag=True, help="Print a band histogram on stderr.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), callback=ranges.png,
              help="Save the band histogram as a PNG.")
@click.option("--posteriors", "posteriors_file", type=click.Path(dir_okay=False), callback=ranges.png,
              metavar="FILE.png", help="Save each task's posterior density, coloured by its band "
              "with the band edges drawn, as a PNG.")
@click.option("--procs", "workers", type=ranges.PROCS,
              help="Processes that read big attempt files.  [default: the CPU count]")
@common_options(skip_invalid=True, quiet=True)
@bundled("opts", BucketOptions)
def cli(attempts, opts: BucketOptions, skip, quiet):
    """Bucket tasks by difficulty from their ATTEMPTS (attempt JSONL files; `-` or none: stdin).

    Per task: n clean runs (system errors excluded), k successes, the posterior
    Beta(k + A, n - k + B), its exact mass in each band, P(kept bands) and a 95% credible
    interval; the task goes to the band with the most mass (ties: the harder band), and is
    kept when that band is (or, with --keep-if Q, when P(kept bands) >= Q). Tasks without
    clean runs are `unprobed`, never kept. Kept tasks go to stdout as difficulty records
    sorted by task_id, or, with --tasks, as task records with a `difficulty` field.

    \b
    Examples (from the repository root):
      bucket --all schemas/examples/attempt.json
      bucket --report --tasks candidates.jsonl attempts.jsonl > pool.jsonl
      bucket --uncertain 0.6 --tasks cands.jsonl att.jsonl | probe -n 12 --resume att.jsonl >> att.jsonl
    """
    rules = opts.rules()
    located = list(read_tasks([opts.tasks_file], skip)) if opts.tasks_file else None
    if located and not opts.allow_bench:
        refuse_held_out(located, opts.tasks_file, "--allow-bench", suite_files(env_domain_dirs()))
    tasks = {task["id"]: task for _, task in located} if located is not None else None
    bench = [t for path in opts.exclude_files for _, t in read_jsonl([path], "task", skip=skip)]
    read = {"duplicates": opts.duplicates, "tool": "bucket", "skip": skip, "workers": opts.workers,
            "struct": Attempt, "repeats": P.Counts.repeated}
    counts = fold_attempts(attempts, P.tally, P.merge, **read)
    reference = (fold_attempts(opts.reference_files, P.tally, P.merge, **read)
                 if opts.reference_files else None)

    ids = _candidates(counts, tasks, opts.tasks_file)
    overlap = P.overlapping(tasks.values() if tasks else (), bench, ids)
    domains = {i: t["domain"] for i, t in tasks.items()} if tasks else None
    records = P.assess(ids, counts, rules, reference=reference, overlap=overlap, domains=domains)

    if opts.uncertain is not None:
        chosen = list(P.uncertain(records, opts.uncertain, rules))
    else:
        chosen = records if opts.emit_all else [d for d in records if d["keep"]]
    if opts.holdout is not None:
        chosen = _hold_out(chosen, opts.holdout, opts.holdout_file, opts.seed, tasks, quiet)
    write_jsonl(_emit(chosen, tasks), streaming=False)

    if opts.report:
        click.echo(table(records, rules.bands.names), err=True)
    if opts.plot_file:
        plot_histogram(records, rules.bands.names, opts.plot_file)
    if opts.posteriors_file:
        plot_posteriors(records, rules.bands, opts.posteriors_file)


def _bands(prior: tuple[float, float], edges, band_names, keep) -> Bands:
    """The bands --edges and --bands describe, after checking --prior and --keep against them."""
    if not all(0 < x <= MAX_PRIOR for x in prior):  # Beta(1e308, ·) has no quantiles to find
        raise click.BadParameter(f"both numbers must be > 0 and at most {MAX_PRIOR:g}, e.g. 0.5,0.5",
                                 param_hint="'--prior'")
    try:
        bands = Bands(edges, band_names) if band_names else (
            Bands(edges) if len(edges) == 4 else Bands(edges, ()))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--edges'") from None
    unknown = [name for name in keep if name not in bands.names]
    if unknown:
        raise click.BadParameter(f"no band named {', '.join(unknown)}; bands: "
                                 f"{','.join(bands.names)}", param_hint="'--keep'")
    return bands


def _hold_out(chosen: list[dict], fraction: float, path: str, seed: int, tasks,
              quiet: bool = False) -> list[dict]:
    """Write a seeded `fraction` of the chosen tasks to `path`; return the rest."""
    chosen, held = P.holdout_split(chosen, fraction, seed)
    with open(path, "wb") as out:
        write_jsonl(_emit(held, tasks), out, streaming=False)
    if not quiet:
        click.echo(f"bucket: {len(held)} task(s) held out to {path}, {len(chosen)} for training",
                   err=True)
    return chosen


def _candidates(counts: dict, tasks: dict | None, tasks_file: str | None) -> list[str]:
    """The task ids to assess: --tasks when given (saying which attempted ids it lacks), else
    every task with attempts."""
    if tasks is None:
        return list(counts)
    stray = sorted(set(counts) - set(tasks))
    if stray:
        click.echo(f"bucket: {len(stray)} task id(s) in the attempts are not in {tasks_file} "
                   f"and are left out (first: {stray[0]})", err=True)
    return list(tasks)


def _emit(records, tasks):
    if tasks is None:
        return records
    return ({**tasks[d["task_id"]], "difficulty": d} for d in records)


main = run(cli, collect_cycles=False)

if __name__ == "__main__":
    sys.exit(main())
