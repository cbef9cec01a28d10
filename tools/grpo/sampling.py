"""Which groups a step trains on: the pool sampler, zero-variance replacement and system-error
re-generation. Pure over a `generate(tasks, round) -> groups` callable, so the bookkeeping is
tested with hand-made rewards and the trainer passes the real rollout + grade path.

Rules (what other trainers' zero-variance and system-error bookkeeping got wrong): a group whose
rewards are all equal is dropped and replaced by a group of a freshly drawn task; a group
holding a `system_error` episode is never scored: its task is generated again in the next round
(at most `max_regenerations` times per task and step, then dropped); everything stops after
`max_rounds` generation rounds. Every count reaches the log.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from endstate.grpo.algorithm import zero_variance


class PoolSampler:
    """Draws tasks from a fixed pool: shuffled passes without replacement, reshuffled when spent.
    Its whole state is JSON (for checkpoints); retired tasks are skipped from then on."""

    def __init__(self, task_ids: Sequence[str], seed: int):
        assert task_ids, "an empty pool"
        assert len(set(task_ids)) == len(task_ids), "task ids repeat in the pool"
        self.ids = list(task_ids)
        self.rng = random.Random(seed)
        self.order: list[str] = []
        self.cursor = 0
        self.retired: set[str] = set()
        self.passes = 0

    @property
    def active(self) -> list[str]:
        return [t for t in self.ids if t not in self.retired]

    def draw(self, n: int) -> list[str]:
        """n task ids; a task repeats within one draw only when the active pool is smaller than n."""
        assert self.active, "every task in the pool has been retired"
        out: list[str] = []
        for _ in range(n * (len(self.ids) + 1) + 1):  # bounded: each pass yields ≥ 1 active id
            if len(out) == n:
                break
            if self.cursor >= len(self.order):
                self.order = self.active
                self.rng.shuffle(self.order)
                self.cursor, self.passes = 0, self.passes + 1
            task_id = self.order[self.cursor]
            self.cursor += 1
            if task_id not in self.retired:
                out.append(task_id)
        assert len(out) == n, (len(out), n)
        return out

    def retire(self, task_id: str) -> None:
        self.retired.add(task_id)

    def restore(self, task_id: str) -> None:
        """Draw a retired task again, from the next pass on (a rest under --rebucket is over)."""
        self.retired.discard(task_id)

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"ids": self.ids, "rng": [version, list(internal), gauss], "order": self.order,
                "cursor": self.cursor, "retired": sorted(self.retired), "passes": self.passes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["ids"] != self.ids:
            raise ValueError("the pool differs from the checkpoint's; resume with the same --pool")
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.order, self.cursor = list(state["order"]), state["cursor"]
        self.retired, self.passes = set(state["retired"]), state["passes"]


@dataclass
class Group:
    """G graded episodes of one task. `rewards` holds None for a system_error episode."""

    task_id: str
    rewards: list[float | None]
    episodes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def system_error(self) -> bool:
        return any(r is None for r in self.rewards)

    @property
    def informative(self) -> bool:
        return not self.system_error and not zero_variance(self.rewards)


@dataclass
class Collected:
    groups: list[Group]  # the informative groups to train on (≤ want)
    generated: list[Group]  # every group generated this step, in order (all become attempts)
    rounds: int = 0
    zero_variance: int = 0  # groups dropped for equal rewards
    system_error_groups: int = 0  # groups hit by a system error (each re-generated or dropped)
    regenerated: int = 0  # re-generations of a task after a system error
    system_error_dropped: int = 0  # tasks dropped after max_regenerations
    refills: int = 0  # tasks drawn after the first round to replace zero-variance groups
    log: list[dict[str, int]] = field(default_factory=list)  # one entry per round

    def counts(self) -> dict[str, int]:
        return {"rounds": self.rounds, "groups_generated": len(self.generated),
                "zero_variance": self.zero_variance, "system_error_groups": self.system_error_groups,
                "regenerated": self.regenerated, "system_error_dropped": self.system_error_dropped,
                "refills": self.refills}


def collect(draw: Callable[[int], list[str]], generate: Callable[[list[str], int], list[Group]],
            want: int, max_rounds: int = 4, max_regenerations: int = 2) -> Collected:
    """Generate groups until `want` informative ones or `max_rounds` rounds (both bounds counted)."""
    assert want > 0 and max_rounds > 0 and max_regenerations >= 0
    out = Collected([], [])
    retry: list[str] = []  # tasks to generate again after a system error
    regens: dict[str, int] = {}
    for round_ in range(max_rounds):
        missing = want - len(out.groups) - len(retry)
        fresh = draw(missing) if missing > 0 else []
        if round_ > 0:
            out.refills += len(fresh)
        out.regenerated += len(retry)
        tasks, retry = retry + fresh, []
        groups = generate(tasks, round_)
        assert [g.task_id for g in groups] == tasks, "generate must return one group per task, in order"
        out.rounds += 1
        out.generated += groups
        entry = {"round": round_, "tasks": len(tasks), "informative": 0, "zero_variance": 0,
                 "system_error": 0}
        for g in groups:
            if g.system_error:
                out.system_error_groups += 1
                entry["system_error"] += 1
                if regens.get(g.task_id, 0) < max_regenerations:
                    regens[g.task_id] = regens.get(g.task_id, 0) + 1
                    retry.append(g.task_id)
                else:
                    out.system_error_dropped += 1
            elif not g.informative:
                out.zero_variance += 1
                entry["zero_variance"] += 1
            else:
                out.groups.append(g)
                entry["informative"] += 1
        out.log.append(entry)
        if len(out.groups) == want:
            break
    out.system_error_dropped += len(retry)  # the round bound ended their re-generation
    return out
