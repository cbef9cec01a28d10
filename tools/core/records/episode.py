"""The ids an episode's records carry, and the records made from an episode at the tools' boundary:
the graded episode (the episode as recorded, plus its verdict) and the attempt."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from endstate.core.records.structs import Attempt, CheckResult, Prompting

PROMPTING = tuple(Prompting.__struct_fields__)  # few_shot, tool_prefill, tool_format, interpreter


def episode_id(task_id: str, attempt: int | str) -> str:
    """Unique per run: the key (task, attempt) plus a random suffix, since attempts repeat."""
    return f"{task_id}/{attempt}/{uuid.uuid4().hex[:8]}"


def call_id(turn: int, i: int) -> str:
    """The id of the i-th tool call of agent turn `turn` (both from 0), in transcripts and in what
    a chat endpoint is shown."""
    return f"call_{turn}_{i}"


def graded_episode(episode: dict[str, Any], grader: dict[str, Any], reward: int | None,
                   checks: list[CheckResult], **overrides: Any) -> dict[str, Any]:
    """The graded episode (schemas/graded_episode.schema.json): the episode as it was recorded,
    every field kept (episodes read from a file may carry fields of their own, so it stays the
    record it was read as), plus the verdict; `overrides` replace recorded fields (status and
    an ErrorInfo when the judge failed)."""
    return {**episode, **msgspec.to_builtins(overrides), "grader": grader, "reward": reward,
            "checks": msgspec.to_builtins(checks)}


def attempt_record(graded: dict[str, Any]) -> dict[str, Any]:
    """The attempt record of a graded episode, built through its Struct (field names and the
    reward/status rule are checked here; values are passed as recorded)."""
    policy = graded["policy"]
    return msgspec.to_builtins(Attempt(
        task_id=graded["task_id"], domain=graded["domain"], attempt=graded["attempt"],
        reward=graded["reward"], status=graded["status"], model=policy.get("model"),
        usage=graded["usage"], cost_usd=graded["cost_usd"], episode_id=graded["episode_id"],
        error=graded.get("error"), prompting=prompting_of(policy)))


def prompting_of(policy: dict[str, Any]) -> dict[str, Any] | None:
    """The prompting settings an episode's policy records (None for records from before them)."""
    found = {k: policy[k] for k in PROMPTING if k in policy}
    return found or None
