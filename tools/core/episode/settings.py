"""The settings of an episode that rollout, probe and grpo share, declared once: the sampling
settings (agent.sampling.Sampling) plus the episode's limits, concurrency and prompting. RunConfig
and grpo's TrainConfig inherit the fields; cli.options turns them into the same flags in every
tool."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from endstate.core.agent.sampling import Sampling


@dataclass
class EpisodeSettings(Sampling):
    """The sampling settings, and the episode's limits, concurrency and prompting."""

    max_context: int = 8192
    max_turns: int | None = None  # None: the task's max_turns, else DEFAULT_MAX_TURNS
    jobs: int = 8
    # prompting: None = what the model folder records, else the generic default (core.prompting)
    few_shot: bool | None = None
    tool_prefill: bool | None = None
    tool_format: str | None = None
    device: str = "cpu"


def episode_values(config: Any) -> dict[str, Any]:
    """The EpisodeSettings fields of any config that inherits them."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(EpisodeSettings)}
