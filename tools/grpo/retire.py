"""--retire: drop tasks from the pool once their posterior (base probes + training attempts)
has moved into a band outside --keep. The bands are bucket's (core.bands); every retirement is
logged.

--rebucket (online re-bucketing; the reference study kept its pool fixed): a task whose posterior
rose above the kept bands is retired for good, one that fell below them rests for --rest-steps
steps and is then drawn again (a policy that improved may now solve it; its evidence keeps
accumulating), and each step logs the pool's band histogram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from endstate.core.records.jsonl import read_jsonl
from endstate.core.stats.bands import Bands, TaskRuns, assign, band_masses, posterior

UNPROBED = "unprobed"  # a task with no clean attempt yet: its posterior is the prior


class Retirement:
    def __init__(self, keep: Sequence[str], base_attempts: Sequence[str] = (), bands: Bands | None = None,
                 rest_steps: int | None = None):
        bands = bands or Bands()
        unknown = set(keep) - set(bands.names)
        if unknown:
            raise click.BadParameter(f"--keep {','.join(sorted(unknown))}: bands are {','.join(bands.names)}")
        self.keep, self.bands, self.rest_steps = set(keep), bands, rest_steps
        kept = [i for i, name in enumerate(bands.names) if name in self.keep]
        self.too_hard = set(bands.names[:min(kept)]) if kept else set()  # below every kept band
        self.resting: dict[str, int] = {}  # task id -> the step after which it is drawn again
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

    def update(self, groups, sampler, step: int = 0) -> list[dict[str, Any]]:
        """Fold this step's groups in; wake the tasks whose rest is over; retire (or, re-bucketing,
        rest the too hard) and return the tasks now outside the kept bands, each with what
        happened to it (`until`: the last step of a rest)."""
        for task_id in [t for t, until in self.resting.items() if until <= step]:
            del self.resting[task_id]
            sampler.restore(task_id)
            click.echo(f"grpo: {task_id} rested until step {step}: drawn again", err=True)
        touched = []
        for g in groups:
            for r in g.rewards:
                self._add(g.task_id, r)
            if g.task_id in self.counts and g.task_id not in touched:
                touched.append(g.task_id)
        moved = []
        for task_id in touched:
            if task_id in sampler.retired or len(sampler.active) <= 1:
                continue
            band = self.band(task_id)
            if band in self.keep:
                continue
            sampler.retire(task_id)
            n, k = self.counts[task_id].runs, self.counts[task_id].successes
            event = {"task_id": task_id, "band": band, "n": n, "k": k}
            if self.rest_steps and band in self.too_hard:
                self.resting[task_id] = event["until"] = step + self.rest_steps
                click.echo(f"grpo: resting {task_id} until step {step + self.rest_steps}: {k}/{n} "
                           f"successes put it in band {band}", err=True)
            else:
                click.echo(f"grpo: retired {task_id}: {k}/{n} successes put it in band {band}", err=True)
            moved.append(event)
        return moved

    def step_metrics(self, groups, sampler, step: int) -> dict[str, Any]:
        """update()'s events for the metrics line; re-bucketing, also the rests and the pool."""
        moved = self.update(groups, sampler, step)
        metrics: dict[str, Any] = {"retired": [m for m in moved if "until" not in m]}
        if self.rest_steps:
            metrics["rested"] = [m for m in moved if "until" in m]
            metrics["pool"] = self.histogram(sampler)
        return metrics

    def histogram(self, sampler) -> dict[str, Any]:
        """The pool now: tasks drawn from, resting and retired, and the bands of those not retired
        (by each one's posterior; `unprobed` before its first clean attempt)."""
        retired = sampler.retired - self.resting.keys()
        bands = dict.fromkeys((*self.bands.names, UNPROBED), 0)
        for task_id in sampler.ids:
            if task_id not in retired:
                bands[self.band(task_id) if task_id in self.counts else UNPROBED] += 1
        return {"active": len(sampler.active), "resting": len(self.resting),
                "retired": len(retired), "bands": bands}

    def state_dict(self) -> dict[str, Any]:
        return {"counts": {t: [r.runs, r.successes] for t, r in self.counts.items()},  # [n, k]
                "resting": self.resting}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {t: TaskRuns(n, k) for t, (n, k) in state["counts"].items()}
        self.resting = dict(state.get("resting", {}))


def retirement_of(cfg) -> Retirement | None:
    """The trainer's pool bookkeeping: --retire, or --rebucket (which retires too); None: a fixed
    pool, as in the reference run."""
    if not (cfg.retire or cfg.rebucket):
        return None
    return Retirement(cfg.keep, cfg.base_attempts, rest_steps=cfg.rest_steps if cfg.rebucket else None)
