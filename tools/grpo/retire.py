"""--retire: drop tasks from the pool once their posterior (base probes + training attempts)
has moved into a band outside --keep. The bands are bucket's (core.bands); every retirement is
logged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from endstate.core.records.jsonl import read_jsonl
from endstate.core.stats.bands import Bands, TaskRuns, assign, band_masses, posterior


class Retirement:
    def __init__(self, keep: Sequence[str], base_attempts: Sequence[str] = (), bands: Bands | None = None):
        bands = bands or Bands()
        unknown = set(keep) - set(bands.names)
        if unknown:
            raise click.BadParameter(f"--keep {','.join(sorted(unknown))}: bands are {','.join(bands.names)}")
        self.keep, self.bands = set(keep), bands
        self.counts: dict[str, TaskRuns] = {}
        for _, record in read_jsonl(list(base_attempts), "attempt") if base_attempts else ():
            self._add(record["task_id"], record["reward"])

    def _add(self, task_id: str, reward: float | None) -> None:
        if reward is None:  # system errors say nothing about difficulty
            return
        runs = self.counts.setdefault(task_id, TaskRuns())
        runs.runs += 1
        runs.successes += int(reward)

    def band(self, task_id: str) -> str:
        runs = self.counts[task_id]
        posteriors = [posterior(runs.runs, runs.successes)]
        return self.bands.names[assign(band_masses(posteriors, self.bands.edges)[0])]

    def update(self, groups, sampler) -> list[dict[str, Any]]:
        """Fold this step's groups in; retire and return the tasks now outside the kept bands."""
        touched = []
        for g in groups:
            for r in g.rewards:
                self._add(g.task_id, r)
            if g.task_id in self.counts and g.task_id not in touched:
                touched.append(g.task_id)
        retired = []
        for task_id in touched:
            if task_id in sampler.retired or len(sampler.active) <= 1:
                continue
            band = self.band(task_id)
            if band not in self.keep:
                sampler.retire(task_id)
                n, k = self.counts[task_id].runs, self.counts[task_id].successes
                retired.append({"task_id": task_id, "band": band, "n": n, "k": k})
                click.echo(f"grpo: retired {task_id}: {k}/{n} successes put it in band {band}", err=True)
        return retired

    def state_dict(self) -> dict[str, Any]:
        return {"counts": {t: [r.runs, r.successes] for t, r in self.counts.items()}}  # [n, k]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {t: TaskRuns(n, k) for t, (n, k) in state["counts"].items()}
