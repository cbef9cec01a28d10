"""Token traces into training tensors. A sequence is the concatenation over an episode's turns of
prompt_ids (masked: system, few-shot, observations, prefills) and completion_ids (trained), exactly
the ids the sampler saw and produced: nothing is re-tokenized."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Sample:
    """One episode, ready to train on: its full id sequence and what to do with each token."""

    ids: list[int]
    completion: list[bool]  # True where the policy sampled the token
    old_logprobs: list[float]  # sampler log p at completion tokens (nan where none was recorded)
    advantage: float
    episode_id: str = ""

    @property
    def completion_tokens(self) -> int:
        return sum(self.completion)


def sample_of(turns: Sequence[dict[str, Any]], advantage: float, episode_id: str = "") -> Sample:
    """concat(prompt_ids, completion_ids) over the turns; logprobs aligned to the ids."""
    ids: list[int] = []
    completion: list[bool] = []
    old: list[float] = []
    for turn in turns:
        prompt, done = turn["prompt_ids"], turn["completion_ids"]
        lps = turn.get("logprobs")
        assert lps is None or len(lps) == len(done), (len(lps), len(done))
        ids += prompt + done
        completion += [False] * len(prompt) + [True] * len(done)
        old += [float("nan")] * len(prompt) + (list(lps) if lps is not None else [float("nan")] * len(done))
    assert ids and not completion[0], "a sequence starts with its prompt"
    return Sample(ids, completion, old, advantage, episode_id)


@dataclass
class Batch:
    """Right-padded tensors for one micro-batch; position t predicts token t + 1."""

    input_ids: torch.Tensor  # (B, T) ids[:-1]
    attention_mask: torch.Tensor  # (B, T)
    targets: torch.Tensor  # (B, T) ids[1:]
    mask: torch.Tensor  # (B, T) 1.0 where the target is a completion token
    old_logprobs: torch.Tensor  # (B, T) sampler log p of the target (nan where unknown or masked)
    advantages: torch.Tensor  # (B, T) the sequence's advantage on every position

    @property
    def tokens(self) -> int:
        return int(self.attention_mask.sum())

    @property
    def columns(self) -> torch.Tensor:
        """(C,) the positions where some row has a completion token: the only ones the loss
        reads (none when no row has one)."""
        return self.mask.any(0).nonzero().squeeze(-1)


def collate(samples: Sequence[Sample], pad_id: int) -> Batch:
    assert samples, "an empty micro-batch"
    width = max(len(s.ids) for s in samples) - 1
    n = len(samples)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)  # (B, T)
    attention = torch.zeros((n, width), dtype=torch.long)  # (B, T)
    targets = torch.full((n, width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((n, width))  # (B, T)
    old = torch.full((n, width), float("nan"))  # (B, T)
    advantages = torch.zeros((n, width))  # (B, T)
    for i, s in enumerate(samples):
        k = len(s.ids) - 1
        input_ids[i, :k] = torch.tensor(s.ids[:-1])
        attention[i, :k] = 1
        targets[i, :k] = torch.tensor(s.ids[1:])
        mask[i, :k] = torch.tensor(s.completion[1:], dtype=torch.float)
        old[i, :k] = torch.tensor(s.old_logprobs[1:])
        advantages[i, :k] = s.advantage
    return Batch(input_ids, attention, targets, mask, old, advantages)


def micro_batches(samples: Sequence[Sample], size: int) -> list[list[Sample]]:
    """Consecutive chunks of at most `size` samples."""
    assert size > 0, size
    return [list(samples[i:i + size]) for i in range(0, len(samples), size)]
