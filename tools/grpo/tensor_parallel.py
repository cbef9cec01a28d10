"""Ranks that share one colocated vLLM engine (tensor parallel: each holds 1/TP of its weights)
call it together: under vLLM's external_launcher the TP ranks run one engine in lockstep, each
with the same prompts and sampling parameters (TRL's colocate mode gathers the prompts of its TP
group the same way).

Here each rank's episodes wait on its lockstep sampler at their own pace, so the ranks of a group
may want a different number of generate calls in a round. Every call is an exchange: the group
gathers each rank's prompts and seeds, the engine generates their concatenation on every rank,
and each rank keeps its own slice. A rank whose episodes are all done joins the group's calls
with nothing of its own (`finish`) until every rank of the group says it is done too, so no
rank waits on a call another never makes.

    (B_r,)  prompts of rank r;  combined: (Σ_r B_r,) in rank order, identical on every rank
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Run = Callable[[list[list[int]], list[int]], Sequence[Any]]  # (prompts, seeds) -> one output each


class GroupBatches:
    """The generate calls of one tensor-parallel group (`group`: its process group; `size`
    ranks; this rank's `index` in it)."""

    def __init__(self, group: Any, size: int, index: int):
        self.group, self.size, self.index = group, size, index
        self.calls = 0  # engine calls this rank joined, its own or the group's

    @classmethod
    def of(cls, tp: int) -> GroupBatches:
        """This rank's group: ranks [g·tp, (g+1)·tp), as external_launcher groups them.
        Collective: every rank of the world calls it."""
        import torch.distributed as dist

        world, rank = dist.get_world_size(), dist.get_rank()
        assert world % tp == 0, (world, tp)
        group, _ = dist.new_subgroups_by_enumeration([list(range(g * tp, (g + 1) * tp))
                                                      for g in range(world // tp)])
        return cls(group, tp, rank % tp)

    def _exchange(self, prompts: list[list[int]], seeds: list[int], done: bool
                  ) -> list[tuple[list[list[int]], list[int], bool]]:
        import torch.distributed as dist

        parts: list[Any] = [None] * self.size
        dist.all_gather_object(parts, (prompts, seeds, done), group=self.group)
        return parts

    def _call(self, parts, run: Run) -> list[Sequence[Any]]:
        """The group's call: the concatenation of every rank's prompts, split back by rank."""
        prompts = [p for part in parts for p in part[0]]
        seeds = [s for part in parts for s in part[1]]
        if not prompts:
            return [[] for _ in parts]
        self.calls += 1
        outputs = list(run(prompts, seeds))
        assert len(outputs) == len(prompts), (len(outputs), len(prompts))
        split, at = [], 0
        for part in parts:
            split.append(outputs[at:at + len(part[0])])
            at += len(part[0])
        return split

    def generate(self, prompts: list[list[int]], seeds: list[int], run: Run) -> Sequence[Any]:
        """This rank's outputs for `prompts`, from one call the whole group makes."""
        assert len(prompts) == len(seeds)
        return self._call(self._exchange(prompts, seeds, False), run)[self.index]

    def finish(self, run: Run) -> None:
        """Join the group's calls with nothing of this rank's until every rank is done."""
        while True:
            parts = self._exchange([], [], True)
            if all(done for _, _, done in parts):
                return
            self._call(parts, run)
