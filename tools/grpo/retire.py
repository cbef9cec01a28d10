"""--retire: drop tasks from the pool once their posterior (base probes + training attempts)
has moved into a band outside --keep. Uses bucket's band code; every retirement is logged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from endstate.bucket.bands import Bands, assign, band_masses, posterior
from endstate.core.records import read_jsonl


class Retirement:
    def __init__(self, keep: Sequence[str], base_attempts: Sequence[str] = (), bands: Bands | None = None):
        bands = bands or Bands()
        unknown = set(keep) - set(bands.names)
        if unknown:
            raise click.BadParameter(f"--keep {','.join(sorted(unknown))}: bands are {','.join(bands.names)}")
        self.keep, self.bands = set(keep), bands
        self.counts: dict[str, list[int]] = {}  # task_id -> [n clean, k successes]
        for _, record in read_jsonl(list(base_attempts), "attempt") if base_attempts else ():
            self._add(record["task_id"], record["reward"])

    def _add(self, task_id: str, reward: float | None) -> None:
        if reward is None:  # system errors say nothing about difficulty
            return
        n_k = self.counts.setdefault(task_id, [0, 0])
        n_k[0] += 1
        n_k[1] += int(reward)

    def band(self, task_id: str) -> str:
        n, k = self.counts[task_id]
        return self.bands.names[assign(band_masses([posterior(n, k)], self.bands.edges)[0])]

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
                n, k = self.counts[task_id]
                retired.append({"task_id": task_id, "band": band, "n": n, "k": k})
                click.echo(f"grpo: retired {task_id}: {k}/{n} successes put it in band {band}", err=True)
        return retired

    def state_dict(self) -> dict[str, Any]:
        return {"counts": self.counts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {k: list(v) for k, v in state["counts"].items()}
