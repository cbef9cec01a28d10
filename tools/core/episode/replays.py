"""Episode records built from a fixed list of steps (a task's gold calls, or any scripted
trajectory). `grade validate` replays gold this way; tests and users build episodes with it too.
The model-driven episode loop (rollout) writes the same record shape.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from endstate.core.env.domain import Domain
from endstate.core.env.sandbox import Sandbox
from endstate.core.records.structs import (
    AssistantMessage,
    Episode,
    Message,
    Policy,
    SystemMessage,
    Task,
    ToolCall,
    ToolMessage,
    UserMessage,
    table_changes,
)

Step = dict[str, Any]  # {"tool": name, "args": {...}} or {"say": text}


def system_prompt(domain: Domain) -> str:
    return domain.policy


def replay(domain: Domain, record: dict[str, Any], steps: list[Step]) -> dict[str, Any]:
    """Run `steps` on a fresh sandbox for the task `record` and return the episode record they
    produce (graders take records as files hold them)."""
    return replay_episode(domain, record, steps).record()


def replay_episode(domain: Domain, record: dict[str, Any], steps: list[Step]) -> Episode:
    """The Episode `steps` make on a fresh sandbox for the task `record`."""
    task = Task.of(record)
    with Sandbox(domain, task.init, task.tools) as sandbox:
        transcript: list[Message] = [SystemMessage(system_prompt(domain)), UserMessage(task.user.opening)]
        for i, step in enumerate(steps):
            if "say" in step:
                transcript.append(AssistantMessage(step["say"]))
                continue
            call = ToolCall.of(step["tool"], step["args"], call_id(i))
            result = sandbox.call(step["tool"], step["args"])
            transcript.append(AssistantMessage(None, tool_calls=[call]))
            transcript.append(ToolMessage(call.id, step["tool"], result.content))
        digest = hashlib.sha256(orjson.dumps(steps)).hexdigest()[:12]
        return Episode(
            episode_id=f"{task.id}/replay/{digest}", task_id=task.id, domain=domain.name,
            attempt=0, policy=Policy(model="replay", backend="replay"), status="ok",
            termination="replay", messages=transcript, changes=table_changes(sandbox.changes()),
            seed_digest=sandbox.seed_digest, usage={}, cost_usd=0.0)


def call_id(index: int) -> str:
    """The tool-call id replay gives step `index`."""
    return f"call_{index}"


def failed_steps(episode: dict[str, Any]) -> dict[int, str]:
    """The error observation of each replayed step that failed, by the step's index."""
    return {int(m["tool_call_id"].rpartition("_")[2]): m["content"] for m in episode["messages"]
            if m["role"] == "tool" and m.get("content", "").startswith('{"error"')}
