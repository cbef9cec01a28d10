"""Training rollouts: G episodes per task with the current weights, through rollout's episode loop
and grade's grader (the same code `rollout` and `probe` run), into `Group`s.

Generation is lockstep: every episode in flight submits its next prompt, and when all of them are
waiting (or done) the prompts go to the generator as batches in submission order. asyncio runs
ready tasks in FIFO order, so the batches, and with a per-round seed the sampled tokens, are the
same on every run: this is what makes `--resume` reproduce a straight run. (rollout's own
`LocalGenerator.submit` batches whatever arrives within 10 ms, which is faster to start but depends
on timing.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from endstate.core.agent.local_model import Generation
from endstate.core.agent.trace import ChatTemplate
from endstate.core.console.progress import Progress
from endstate.core.episode.backends import LiveSampler, build_backend
from endstate.core.episode.config import RunConfig
from endstate.core.episode.runtime import ATTEMPT_COUNTS, run_all
from endstate.core.episode.settings import episode_values
from endstate.core.grading.grader import Grader
from endstate.core.records.structs import Episode, Prompting
from endstate.grpo.config import TrainConfig, role_keys
from endstate.grpo.sampling import Group


def run_config(cfg: TrainConfig, seed: int, prompting: Prompting | None = None) -> RunConfig:
    """The episode settings of a step, with rollout's simulated user; `prompting`: as resolved
    for the run (see RunConfig). The user's API key is its own (core.wire.keys), as rollout's."""
    return RunConfig(backend="local", model=cfg.model, seed=seed, resolved_prompting=prompting,
                     user=cfg.user, user_urls=list(cfg.user_url), user_model=cfg.user_model,
                     user_seed=cfg.user_seed, user_key=role_keys(cfg)[0].get("user"),
                     user_key_env=cfg.user_key_env, preflight=cfg.preflight, timeout=cfg.timeout,
                     retries=cfg.retries, **episode_values(cfg))


class LockstepSampler:
    """`sample(prompt)` for TokenBackend; generates when every live episode is waiting on it."""

    def __init__(self, generate: Callable[[list[list[int]], list[int]], list[Generation]],
                 max_batch: int):
        assert max_batch > 0
        self.generate, self.max_batch = generate, max_batch
        self.live = 0
        self.pending: list[tuple[list[int], int, asyncio.Future]] = []
        self.calls = 0  # generate() calls, for the logs

    def start(self, episodes: int) -> None:
        assert not self.pending and self.live == 0, "a round is still running"
        self.live = episodes

    def finished(self) -> None:
        self.live -= 1
        assert self.live >= 0
        self._flush()

    async def sample(self, prompt: list[int], prefix_len: int = 0) -> Generation:
        """`prefix_len`: leading tokens shared by the domain's episodes (the generator may reuse
        their KV cache)."""
        future = asyncio.get_running_loop().create_future()
        self.pending.append((prompt, prefix_len, future))
        self._flush()
        return await future

    def _flush(self) -> None:
        if not self.pending or len(self.pending) < self.live:
            return
        batch, self.pending = self.pending, []
        for i in range(0, len(batch), self.max_batch):
            chunk = batch[i:i + self.max_batch]
            self.calls += 1
            try:
                results = self.generate([p for p, _, _ in chunk], [n for _, n, _ in chunk])
            except Exception as e:  # noqa: BLE001 - each waiting episode gets the error
                for _, _, future in chunk:
                    future.set_exception(e)
                continue
            assert len(results) == len(chunk)
            for (_, _, future), result in zip(chunk, results):
                future.set_result(result)


def run_groups(tasks: list[dict[str, Any]], group_size: int, cfg: RunConfig, domains, grader: Grader,
               template: ChatTemplate, generate: Callable[[list[list[int]], list[int]], list[Generation]],
               attempt_bases: list[int], quiet: bool = False) -> list[Group]:
    """One group of `group_size` graded episodes per task (tasks may repeat), in task order.
    `generate` samples a batch of prompts with the current weights; `attempt_bases[i]` numbers
    the attempts so they stay unique across steps."""
    assert len(attempt_bases) == len(tasks)
    sampler = LockstepSampler(generate, max_batch=cfg.jobs)
    backend = build_backend(cfg, LiveSampler(template, sampler.sample))
    keys = []
    slots: dict[tuple[str, int], tuple[int, int]] = {}  # (task_id, attempt) -> (group, index)
    for g, (task, base) in enumerate(zip(tasks, attempt_bases)):
        for i in range(group_size):
            keys.append((task, base + i))
            slots[(task["id"], base + i)] = (g, i)
    graded: list[list[dict | None]] = [[None] * group_size for _ in tasks]

    async def on_episode(task: dict[str, Any], episode: Episode) -> dict[str, Any]:
        g, i = slots[(task["id"], episode.attempt)]
        sampler.finished()  # before grading: the others generate while a judge answers
        graded[g][i] = await grader.agrade(episode.record(), task)
        return graded[g][i]

    sampler.start(len(keys))
    # every episode in flight at once: the lockstep sampler does the batching (cfg.jobs per batch)
    # a bar while the step's episodes run (a terminal only); grpo logs the step's summary itself
    progress = Progress(len(keys), "rollouts", quiet=quiet, counts=ATTEMPT_COUNTS, summary=False)
    try:
        asyncio.run(run_all(keys, dataclasses.replace(cfg, jobs=max(1, len(keys))), domains,
                            backend, on_episode, progress, closing=[grader]))
    finally:
        progress.close()
    assert all(e is not None for row in graded for e in row), "an episode was not graded"
    return [Group(task["id"], [e["reward"] for e in row], row) for task, row in zip(tasks, graded)]


def slim(episode: dict[str, Any]) -> dict[str, Any]:
    """What the trainer keeps of a graded episode (the rest stays out of all_gather)."""
    keep = ("episode_id", "task_id", "domain", "attempt", "reward", "status", "error", "policy",
            "usage", "cost_usd", "turns", "termination")
    return {k: episode.get(k) for k in keep}
