"""The episode record (schemas/episode.schema.json) and its transcript messages, each built in one
place. `Episode` is a msgspec Struct mirroring the schema, so a misspelt or missing field fails
where the record is made, not in a reader downstream; tools pass the result on as a plain dict
(grade, probe and grpo read and extend it), which `new_episode` returns."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import orjson

Record = dict[str, Any]


class Episode(msgspec.Struct, kw_only=True):
    episode_id: str
    task_id: str
    domain: str
    attempt: int
    policy: Record
    status: str  # ok | system_error
    error: Record | None = None  # kind, message, attempts (system_error only)
    termination: str | None  # agent_done | user_stop | max_turns | context_overflow | replay
    messages: list[Record]
    turns: list[Record] | msgspec.UnsetType = msgspec.UNSET  # token-level backends, MCP
    changes: Record
    seed_digest: str
    usage: Record
    cost_usd: float | None
    timing: Record | msgspec.UnsetType = msgspec.UNSET  # seconds; replays are not timed


def new_episode(**fields: Any) -> Record:
    """An episode record as a dict, checked field by field (names and types) against `Episode`:
    a builder that forgets a field or passes the wrong type fails here, in a test."""
    return msgspec.to_builtins(msgspec.convert(fields, Episode))


def episode_id(task_id: str, attempt: int | str) -> str:
    """Unique per run: the key (task, attempt) plus a random suffix, since attempts repeat."""
    return f"{task_id}/{attempt}/{uuid.uuid4().hex[:8]}"


def assistant_message(content: str | None, calls: list[tuple[str, str, dict[str, Any]]] = (),
                      **extra: Any) -> Record:
    """An assistant turn: its text, `extra` fields (reasoning, raw, parse_error) and the tool calls
    it makes [(call id, tool name, arguments)], OpenAI-style."""
    message = {"role": "assistant", "content": content, **extra}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}
            for call_id, name, arguments in calls]
    return message


def call_id(turn: int, i: int) -> str:
    """The id of the i-th tool call of agent turn `turn` (both from 0), in transcripts and in what
    a chat endpoint is shown."""
    return f"call_{turn}_{i}"


def tool_result_message(call_id: str, name: str, content: str) -> Record:
    """The observation answering one tool call."""
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def graded_episode(episode: Record, grader: Record, reward: int | None, checks: list[Record],
                   **overrides: Any) -> Record:
    """The graded episode (schemas/graded_episode.schema.json): the episode as it was recorded,
    every field kept (episodes may carry fields of their own, so no Struct here), plus the
    verdict; `overrides` replace recorded fields (status and error when the judge failed)."""
    return {**episode, **overrides, "grader": grader, "reward": reward, "checks": checks}
