"""Episode records built from a fixed list of steps (a task's gold calls, or any scripted
trajectory). `grade validate` replays gold this way; tests and users build episodes with it too.
The model-driven episode loop (rollout) writes the same record shape.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from endstate.core.domain import Domain
from endstate.core.episode_record import assistant_message, new_episode, tool_result_message
from endstate.core.sandbox import Sandbox

Step = dict[str, Any]  # {"tool": name, "args": {...}} or {"say": text}


def system_prompt(domain: Domain) -> str:
    return domain.policy


def replay(domain: Domain, task: dict[str, Any], steps: list[Step]) -> dict[str, Any]:
    """Run `steps` on a fresh sandbox for `task` and return the episode record they produce."""
    with Sandbox(domain, task.get("init"), task.get("tools")) as sandbox:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(domain)},
            {"role": "user", "content": task["user"]["opening"]},
        ]
        for i, step in enumerate(steps):
            if "say" in step:
                messages.append({"role": "assistant", "content": step["say"]})
                continue
            call_id = f"call_{i}"
            result = sandbox.call(step["tool"], step["args"])
            messages.append(assistant_message(None, [(call_id, step["tool"], step["args"])]))
            messages.append(tool_result_message(call_id, step["tool"], result.content))
        digest = hashlib.sha256(orjson.dumps(steps)).hexdigest()[:12]
        return new_episode(
            episode_id=f"{task['id']}/replay/{digest}", task_id=task["id"], domain=domain.name,
            attempt=0, policy={"model": "replay", "backend": "replay"}, status="ok",
            termination="replay", messages=messages, changes=sandbox.changes(),
            seed_digest=sandbox.seed_digest, usage={}, cost_usd=0.0)


def failed_calls(episode: dict[str, Any]) -> list[str]:
    """The error observations of an episode's tool calls, for reports."""
    return [m["content"] for m in episode["messages"]
            if m["role"] == "tool" and m.get("content", "").startswith('{"error"')]
