"""`rollout serve-mcp`: one fresh sandbox of a task, served as an MCP server over stdio, so any MCP
client (an IDE agent, a hosted model's MCP connector, the SDK's own client) can drive it.

The task's tools are listed with the JSON schemas the sandbox validates against; each call runs in
the sandbox and its result (or error observation) goes back as text, `isError` set on errors. The
server's instructions carry the domain policy and the user's opening. When the client ends the
session (closes stdin, or SIGTERM) the episode is written to `--out` in the record shape `rollout`
writes (schemas/episode.schema.json), with the database diff, so `grade` scores it.

Needs the `mcp` SDK: pip install 'endstate[mcp]'.
"""

from __future__ import annotations

import io
import signal
import sys
import time
from typing import Any

import orjson

from endstate.core import stdio
from endstate.core.domain import Domain
from endstate.core.episode_record import (
    assistant_message,
    episode_id,
    new_episode,
    tool_result_message,
)
from endstate.core.errors import EndstateError
from endstate.core.sandbox import Sandbox

SERVER_NAME = "endstate"


def instructions(domain: Domain, task: dict[str, Any]) -> str:
    return (f"{domain.policy.strip()}\n\nThe customer says: {task['user']['opening']}\n\n"
            "Act through the tools; the episode is graded on the database state you leave.")


class SandboxSession:
    """The episode an MCP session builds: tool calls on one sandbox, recorded as messages."""

    def __init__(self, domain: Domain, task: dict[str, Any], attempt: int = 0):
        self.domain, self.task, self.attempt = domain, task, attempt
        self.sandbox = Sandbox(domain, task.get("init"), task.get("tools"))
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": domain.policy},
                                               {"role": "user", "content": task["user"]["opening"]}]
        self.started = time.perf_counter()
        self.tools_s = 0.0

    def tool_specs(self) -> list[dict[str, Any]]:
        """name, description and JSON-schema parameters of every tool the task allows."""
        return [t.schema["function"] for t in self.sandbox.tools.values()]

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[bool, str]:
        """Run one call; (ok, what the agent sees). Never raises on bad calls."""
        call_id = f"call_{sum(1 for m in self.messages if m['role'] == 'tool')}"
        args = arguments or {}
        t = time.perf_counter()
        result = self.sandbox.call(name, args)
        self.tools_s += time.perf_counter() - t
        self.messages.append(assistant_message(None, [(call_id, name, args)]))
        self.messages.append(tool_result_message(call_id, name, result.content))
        return result.ok, result.content

    def record(self) -> dict[str, Any]:
        """The episode record (schemas/episode.schema.json), as rollout writes it."""
        task = self.task
        return new_episode(
            episode_id=episode_id(task["id"], self.attempt), task_id=task["id"],
            domain=self.domain.name, attempt=self.attempt,
            policy={"model": "mcp-client", "backend": "mcp"}, status="ok",
            termination="agent_done", messages=self.messages, turns=[],
            changes=self.sandbox.changes(), seed_digest=self.sandbox.seed_digest, usage={},
            cost_usd=None, timing={"tools_s": round(self.tools_s, 4),
                                   "total_s": round(time.perf_counter() - self.started, 4)})

    def close(self) -> None:
        self.sandbox.close()


def _server(session: SandboxSession):
    """An MCP low-level server over `session` (the mcp 2.x handler API)."""
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool.model_validate({"name": s["name"], "description": s.get("description", ""),
                                       "inputSchema": s["parameters"]})
            for s in session.tool_specs()])

    async def call_tool(ctx, params) -> types.CallToolResult:
        ok, content = session.call(params.name, params.arguments)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": content}], "isError": not ok})

    return Server(SERVER_NAME, instructions=instructions(session.domain, session.task),
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio(domain: Domain, task: dict[str, Any], out_path: str, attempt: int = 0) -> dict[str, Any]:
    """Serve one session over stdin/stdout until the client ends it; write and return the episode."""
    try:
        import anyio
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise EndstateError("rollout serve-mcp needs the mcp SDK: pip install 'endstate[mcp]'") from None

    session = SandboxSession(domain, task, attempt)
    server = _server(session)

    async def run() -> None:
        # The MCP channel is the records stream (core.stdio): whatever else writes to stdout
        # goes to stderr, so stray output cannot corrupt the protocol.
        channel = io.TextIOWrapper(stdio.records_out(), encoding="utf-8", write_through=True)
        try:
            async with stdio_server(stdout=anyio.wrap_file(channel)) as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            channel.detach()  # the records stream is not the wrapper's to close

    # A client that stops the server with SIGTERM still gets its episode written.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        anyio.run(run)
    finally:
        signal.signal(signal.SIGTERM, previous)
        episode = session.record()
        session.close()
        with open(out_path, "ab") as fh:
            fh.write(orjson.dumps(episode) + b"\n")
        calls = sum(1 for m in episode["messages"] if m["role"] == "tool")
        print(f"serve-mcp: {task['id']}: {calls} tool call(s); episode written to {out_path}",
              file=sys.stderr)
    return episode
