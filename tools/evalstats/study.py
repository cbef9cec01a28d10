"""Attempt files seen as a study: read into a tally (tally_files), seen as groups of tasks with
their metrics objects (Study: summary's and report's object), and two runs compared
(compare_files)."""

from __future__ import annotations

import click

from endstate.core.console import stdio
from endstate.core.errors import EndstateError, ExitCode, InputError
from endstate.core.records.jsonl import SkipLog, read_jsonl, write_jsonl
from endstate.core.records.keys import fold_attempts, policy_clean_key
from endstate.evalstats import groups as G
from endstate.evalstats import metrics as M
from endstate.evalstats import tally as T
from endstate.evalstats.compare import common_tasks
from endstate.evalstats.compare import compare as compare_runs
from endstate.evalstats.options import Reading


class Study:
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

    def by_policy(self, ks: list[int] | None) -> dict:
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
    studies = [Study(tally_files([path], fields, prices, None, skip, reading), tasks, None,
                  reading.estimand) for path in (base, new)]
    _say_what_is_paired(studies, base, new)
    clusters = _agreed(studies, cluster, tasks) if cluster else None
    try:
        report = compare_runs(studies[0].overall, studies[1].overall, k, reading.estimand, clusters,
                              cluster)
        for field in by_fields:
            agreed = _agreed(studies, field, tasks) if G.is_task_field(field, tasks) else None
            b, n = (v.groups(field, agreed) for v in studies)
            report[f"by_{field}"] = {name: compare_runs(b[name], n[name], report["pass_at_k"]["k"],
                                                        reading.estimand, clusters, cluster)
                                     for name in sorted(set(b) & set(n))}
    except M.KTooLarge as e:
        raise EndstateError(f"--k {e.k}: task {e.task_id!r} has only {e.n} clean attempt(s) in one "
                            f"of the runs; use k <= {e.n}", ExitCode.USAGE) from None
    for name, path in (("base", base), ("new", new)):
        warn_cost(report["cost"][name], f"{name.upper()} ({path})")
    _say_k(report, studies)
    return report


def _say_k(report: dict, studies: list[Study]) -> None:
    """Say on stderr when the runs' repeat counts differ: k/k is compared at the smaller."""
    obs = report["observed_all"]
    if obs["estimated"]:
        ranges = []
        for name, study in zip(("BASE", "NEW"), studies):
            ns = sorted({c.attempts for c in study.overall.values() if c.attempts})
            ranges.append(f"{name} {ns[0]}" + (f"–{ns[-1]}" if len(ns) > 1 else ""))
        click.echo(f"evalstats compare: attempts per task differ ({', '.join(ranges)}): k/k is "
                   f"compared at k = {obs['k']}, {' and '.join(n.upper() for n in obs['estimated'])}"
                   f"'s as pass^{obs['k']} over its attempts (observed_all.estimated)", err=True)


def _agreed(studies: list[Study], field: str, tasks: dict | None) -> dict:
    """task_id -> its value of a task property, which BASE and NEW must agree on (as the
    attempts within one file must): a conflict is an input error naming the task."""
    b, n = (v.property(field) for v in studies)
    for task_id in sorted(set(b) & set(n)):
        if b[task_id] is not None and n[task_id] is not None and b[task_id] != n[task_id]:
            raise InputError(f"evalstats: task {task_id!r} has {field} {b[task_id]!r} in BASE and "
                             f"{n[task_id]!r} in NEW; a task's {field} is one value: fix the "
                             "attempts, or pass --tasks FILE to take it from the task records")
    return {t: b.get(t) if b.get(t) is not None else n.get(t) for t in {*b, *n}}


def _say_what_is_paired(studies: list[Study], base: str, new: str) -> None:
    """compare pairs the tasks both runs have: say on stderr when either has others."""
    b, n = studies[0].overall, studies[1].overall
    common = set(common_tasks(b, n))
    only = [sorted(t for t, c in side.items() if c.attempts > 0 and t not in common)
            for side in (b, n)]
    if any(only):
        parts = [f"{len(ids)} only in {name} (first: {ids[0]!r})"
                 for name, ids in (("BASE", only[0]), ("NEW", only[1])) if ids]
        click.echo(f"evalstats compare: {'; '.join(parts)}; the comparison pairs the "
                   f"{len(common)} task(s) both have (only_base, only_new)", err=True)
    for name, path, study in (("BASE", base, studies[0]), ("NEW", new, studies[1])):
        labels = G.policy_labels(study.tally)
        if len(labels) > 1:
            click.echo(f"evalstats compare: {name} ({path}) holds {len(labels)} policies "
                       f"({', '.join(sorted(labels.values()))}); they are pooled", err=True)
