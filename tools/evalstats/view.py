"""What evalstats' commands share: their settings objects and options, reading the attempts into
a tally, and the tally seen as groups of tasks with their metrics objects."""

from __future__ import annotations

from dataclasses import dataclass

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options, parse_prices
from endstate.core.console import stdio
from endstate.core.errors import EndstateError, ExitCode, InputError
from endstate.core.records.jsonl import SkipLog, read_jsonl, write_jsonl
from endstate.core.records.keys import MODES, fold_attempts, policy_clean_key
from endstate.evalstats import groups as G
from endstate.evalstats import intervals as I
from endstate.evalstats import metrics as M
from endstate.evalstats import tally as T
from endstate.evalstats.compare import common_tasks
from endstate.evalstats.compare import compare as compare_runs


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


class View:
    """The tally seen through the task properties: groups and their metrics objects."""

    def __init__(self, tally: T.Tally, tasks: dict | None, cluster: str | None, estimand: str):
        self.tally, self.tasks, self.estimand = tally, tasks, estimand
        self.overall = G.group_tasks(tally).get("overall", G.TaskCounts())
        self.cluster = cluster
        self.clusters = self.property(cluster) if cluster else None
        self.ks: list[int] = []

    def property(self, field: str) -> dict | None:
        try:
            return G.task_property(self.tally, field, self.tasks)
        except G.FieldConflict as e:
            raise InputError(f"evalstats: {e}") from None

    def _field(self, field: str, by_task: dict | None = None) -> tuple[str, dict | None]:
        """(field, task_id -> value when it is a task property, else None), after checking that
        some record has it."""
        try:
            G.check_present(self.tally, [field], self.tasks)
        except G.FieldAbsent as e:
            raise EndstateError(str(e)) from None
        if by_task is None and G.is_task_field(field, self.tasks):
            by_task = self.property(field)
        return field, by_task

    def groups(self, field: str, by_task: dict | None = None) -> dict[str, G.TaskCounts]:
        return G.group_tasks(self.tally, *self._field(field, by_task))

    def by(self, field: str, ks: list[int] | None = None) -> dict[str, dict]:
        ks = self.ks if ks is None else ks
        return {name: self.metrics(tasks, ks) for name, tasks in sorted(self.groups(field).items())}

    def metrics(self, tasks: G.TaskCounts, ks: list[int], strict_k: bool = False) -> dict:
        return M.metrics(tasks, ks, self.clusters, self.estimand, strict_k, self.cluster,
                         max(len(tasks.policies), 1))

    def report(self, by_fields, ks: list[int] | None) -> dict:
        """`overall` (never touched by --by: its default k comes from its own tasks), then a
        by_FIELD map per --by field (a k some task there cannot answer is null there); with two
        or more, each group of the first also holds by_SECOND: the first × second table. With
        several policies and no --by model or policy, by_policy too: a group that pools them
        has no pass@k, pass^k or k/k (metrics.pooled_policies)."""
        self.ks = ks if ks is not None else G.default_ks(self.common_repeats())
        try:
            report = {"overall": self.metrics(self.overall, self.ks, strict_k=ks is not None)}
        except M.KTooLarge as e:
            raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean "
                                f"attempt(s); use k <= {e.n}, or re-run its missing attempts",
                                ExitCode.USAGE) from None
        for field in by_fields:
            report[f"by_{field}"] = self.by(field)
        if len(by_fields) >= 2:
            first, second = by_fields[:2]
            cells = G.cross_tasks(self.tally, [self._field(first), self._field(second)])
            for (a, b), tasks in sorted(cells.items()):
                group = report[f"by_{first}"][a].setdefault(f"by_{second}", {})
                group[b] = self.metrics(tasks, self.ks)
        if len(self.tally.policies) > 1 and not {"model", G.POLICY} & set(by_fields):
            report[f"by_{G.POLICY}"] = self.by(G.POLICY)
        return report

    def study(self, ks: list[int] | None) -> dict:
        """report() by policy, and by policy × domain when the records have a domain (the
        report page's object, and summary --plot's)."""
        try:
            G.check_present(self.tally, ["domain"], self.tasks)
            by = [G.POLICY, "domain"]
        except G.FieldAbsent:
            by = [G.POLICY]
        return self.report(by, ks)

    def common_repeats(self) -> int:
        """The largest k every task of every policy can answer (with one policy, of `overall`:
        a task two policies ran has both runs' attempts there, but each run's k is the one
        its own pass@k can have)."""
        if len(self.tally.policies) < 2:
            return G.common_repeats(self.overall)
        return min(G.common_repeats(tasks) for tasks in self.groups(G.POLICY).values())

    def policy_note(self, by_fields) -> None:
        """Say on stderr when `overall` pools several policies, and when --by model pools one
        model's runs under several prompting settings."""
        labels = G.policy_labels(self.tally)
        models = {model for model, _ in self.tally.policies}
        if len(labels) > 1 and not {"model", G.POLICY} & set(by_fields):
            click.echo(f"evalstats: the attempts come from {len(labels)} policies: by_policy "
                       "reports each; `overall` pools them, without pass@k, pass^k or k/k",
                       err=True)
        elif "model" in by_fields and len(models) < len(labels):
            click.echo("evalstats: some model was run with several prompting settings; by_model "
                       "pools them, without pass@k, pass^k or k/k (--by policy tells them apart)",
                       err=True)


def warn_cost(cost: dict, who: str = "") -> None:
    """Say on stderr when attempts of a --price model have no token counts, and when only some
    attempts have a cost (`who`: the run, in compare)."""
    who = f"{who}: " if who else ""
    if cost["unpriced_attempts"]:
        click.echo(f"evalstats: {who}{cost['unpriced_attempts']} attempt(s) of a --price model "
                   "have no usage.agent token counts: they are left out of the cost "
                   "(cost.unpriced_attempts)", err=True)
    if 0 < cost["priced_attempts"] < cost["recorded_attempts"]:
        click.echo(f"evalstats: {who}only {cost['priced_attempts']} of "
                   f"{cost['recorded_attempts']} attempts have a cost (cost_usd, or --price for "
                   "their model); total_usd covers those, the ratios are the priced attempts' "
                   "(docs/evalstats.md)", err=True)


def read_tasks(path: str, skip: SkipLog | None) -> dict[str, dict]:
    return {t["id"]: t for _, t in read_jsonl([path], "task", skip=skip)}


def write_output(report: dict, fmt: str, table) -> None:
    if fmt == "json":
        write_jsonl([report])
    else:
        stdio.echo(table(report, style=fmt))


def tally_files(paths, fields, prices, grid, skip, reading: Reading) -> T.Tally:
    """The attempts in `paths`, folded (in forked readers for big files) into one Tally; two
    clean records of one (policy, task_id, attempt) are an input error unless --duplicates
    keeps one. `--by policy` is no record field: the tally keys every cell by policy."""
    tally = T.tally_fn([f for f in fields if f != G.POLICY], prices, grid)
    return fold_attempts(paths, tally, T.merge, duplicates=reading.duplicates, tool="evalstats",
                         skip=skip, workers=reading.workers, struct=tally.struct,
                         repeats=T.Tally.repeated, key_of=policy_clean_key)


def compare_files(base: str, new: str, by_fields: list[str], k: int | None, cluster: str | None,
                  prices, reading: Reading, skip) -> dict:
    """The compare object of two attempt files (summary's reading rules; a task property must
    agree between them), with by_FIELD maps."""
    tasks = read_tasks(reading.tasks_file, skip) if reading.tasks_file else None
    fields = list(dict.fromkeys([*by_fields, *([cluster] if cluster else [])]))
    views = [View(tally_files([path], fields, prices, None, skip, reading), tasks, None,
                  reading.estimand) for path in (base, new)]
    _say_what_is_paired(views, base, new)
    clusters = _agreed(views, cluster, tasks) if cluster else None
    try:
        report = compare_runs(views[0].overall, views[1].overall, k, reading.estimand, clusters,
                              cluster)
        for field in by_fields:
            agreed = _agreed(views, field, tasks) if G.is_task_field(field, tasks) else None
            b, n = (v.groups(field, agreed) for v in views)
            report[f"by_{field}"] = {name: compare_runs(b[name], n[name], report["pass_at_k"]["k"],
                                                        reading.estimand, clusters, cluster)
                                     for name in sorted(set(b) & set(n))}
    except M.KTooLarge as e:
        raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean attempt(s) in one "
                            f"of the runs; use k <= {e.n}", ExitCode.USAGE) from None
    for name, path in (("base", base), ("new", new)):
        warn_cost(report["cost"][name], f"{name.upper()} ({path})")
    _say_k(report, views)
    return report


def _say_k(report: dict, views: list[View]) -> None:
    """Say on stderr when the runs' repeat counts differ: k/k is compared at the smaller."""
    obs = report["observed_all"]
    if obs["estimated"]:
        ranges = []
        for name, view in zip(("BASE", "NEW"), views):
            ns = sorted({c.attempts for c in view.overall.values() if c.attempts})
            ranges.append(f"{name} {ns[0]}" + (f"–{ns[-1]}" if len(ns) > 1 else ""))
        click.echo(f"evalstats compare: attempts per task differ ({', '.join(ranges)}): k/k is "
                   f"compared at k = {obs['k']}, {' and '.join(n.upper() for n in obs['estimated'])}"
                   f"'s as pass^{obs['k']} over its attempts (observed_all.estimated)", err=True)


def _agreed(views: list[View], field: str, tasks: dict | None) -> dict:
    """task_id -> its value of a task property, which BASE and NEW must agree on (as the
    attempts within one file must): a conflict is an input error naming the task."""
    b, n = (v.property(field) for v in views)
    for task_id in sorted(set(b) & set(n)):
        if b[task_id] is not None and n[task_id] is not None and b[task_id] != n[task_id]:
            raise InputError(f"evalstats: task {task_id!r} has {field} {b[task_id]!r} in BASE and "
                             f"{n[task_id]!r} in NEW; a task's {field} is one value: fix the "
                             "attempts, or pass --tasks FILE to take it from the task records")
    return {t: b.get(t) if b.get(t) is not None else n.get(t) for t in {*b, *n}}


def _say_what_is_paired(views: list[View], base: str, new: str) -> None:
    """compare pairs the tasks both runs have: say on stderr when either has others."""
    b, n = views[0].overall, views[1].overall
    common = set(common_tasks(b, n))
    only = [sorted(t for t, c in side.items() if c.attempts > 0 and t not in common)
            for side in (b, n)]
    if any(only):
        parts = [f"{len(ids)} only in {name} (first: {ids[0]!r})"
                 for name, ids in (("BASE", only[0]), ("NEW", only[1])) if ids]
        click.echo(f"evalstats compare: {'; '.join(parts)}; the comparison pairs the "
                   f"{len(common)} task(s) both have (only_base, only_new)", err=True)
    for name, path, view in (("BASE", base, views[0]), ("NEW", new, views[1])):
        labels = G.policy_labels(view.tally)
        if len(labels) > 1:
            click.echo(f"evalstats compare: {name} ({path}) holds {len(labels)} policies "
                       f"({', '.join(sorted(labels.values()))}); they are pooled", err=True)
