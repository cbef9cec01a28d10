"""`rollout serve-mcp`: a fresh sandbox of a task served as an MCP server, so any MCP client (an IDE
agent, a hosted model's MCP connector, the SDK's own client) can drive it: over stdio, one task and
one session (here); over streamable HTTP, a gateway handing each session the next key of a plan
(gateway.py).

The task's tools are listed with the JSON schemas the sandbox validates against; each call runs in
the sandbox and its result (or error observation) goes back as text, `isError` set on errors. One
more tool, USER_TOOL, is the channel to the task's simulated user (scripted or LLM, as rollout's
--user): its argument is what the agent says, its result is the user's reply. Both are recorded as
rollout records a conversation turn (an assistant message with that text, then the user's
message), so `said` checks read them. When the user ends the conversation the tool says so and the
episode is over: later calls are refused, as rollout stops at `user_stop`. The server's
instructions carry the domain policy and the user's opening. When the session ends the episode is
written in the record shape `rollout` writes (schemas/episode.schema.json), with the database
diff, so `grade` scores it.

Needs the `mcp` SDK: pip install 'endstate[mcp]'.
"""

from __future__ import annotations

import io
import logging
import signal
import sys
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import orjson

from endstate.core.console import stdio
from endstate.core.env.domain import Domain
from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.users import STOP, LLMUser, ScriptedUser
from endstate.core.errors import EndstateError
from endstate.core.records.episode import episode_id
from endstate.core.records.structs import (
    AssistantMessage,
    Episode,
    ErrorInfo,
    Message,
    Policy,
    SystemMessage,
    Task,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    table_changes,
)
from endstate.core.wire.endpoints import EndpointFailure

log = logging.getLogger("endstate")

SERVER_NAME = "endstate"
# A hyphen cannot be in a domain tool's name (a Python function's), so this one never collides.
USER_TOOL = "send-message-to-user"
USER_LEFT = "The user ended the conversation. The episode is over: end the session."
EPISODE_OVER = "The episode is over ({why}); nothing more is recorded: end the session."

Price = Callable[[dict[str, Usage]], "float | None"]


def instructions(domain: Domain, task: Task) -> str:
    return (f"{domain.policy.strip()}\n\nThe customer says: {task.user.opening}\n\n"
            f"Talk to the customer only through the `{USER_TOOL}` tool: its result is their reply. "
            "Act through the other tools; the episode is graded on the database state you leave "
            "and on what you told the customer.")


USER_TOOL_SPEC = {
    "name": USER_TOOL,
    "description": "Send a message to the customer and wait for their reply, which this tool "
                   "returns. This is the only way to talk to them.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["message"],
                   "properties": {"message": {"type": "string", "minLength": 1,
                                              "description": "What you say to the customer."}}},
}


def _user_failure(e: Exception) -> ErrorInfo:
    """The episode's `error` when its simulated user failed: as rollout records it."""
    if isinstance(e, EndpointFailure):
        return ErrorInfo(e.kind, e.message, e.attempts)
    if isinstance(e, EndstateError):  # a setup the operator must fix (a 401 from the user's LLM)
        log.error("the simulated user's endpoint refused: %s", e.message)
        return ErrorInfo("configuration", e.message)
    log.error("the simulated user failed (recorded as system_error)", exc_info=e)
    return ErrorInfo("internal", f"{type(e).__name__}: {e}")


class SandboxSession:
    """The episode an MCP session builds: tool calls on one sandbox and the conversation with the
    task's simulated user, recorded as messages."""

    def __init__(self, domain: Domain, task: Task, attempt: int,
                 user: ScriptedUser | LLMUser, price: Price = lambda usage: None,
                 policy: Policy | None = None):
        self.domain, self.task, self.attempt, self.user, self.price = domain, task, attempt, user, price
        self.policy = policy or Policy(model="mcp-client", backend="mcp")
        self.sandbox = Sandbox(domain, task.init, task.tools)
        self.episode_id = episode_id(task.id, attempt)  # from the start: an OpenEnv reset shows it
        self.transcript: list[Message] = [SystemMessage(domain.policy), UserMessage(task.user.opening)]
        self.termination: str | None = None  # user_stop once the user ends the conversation
        self.error: ErrorInfo | None = None  # a system error ends the episode too
        self.started = time.perf_counter()
        self.timing = {"tools_s": 0.0, "user_s": 0.0}

    def tool_specs(self) -> list[dict[str, Any]]:
        """name, description and JSON-schema parameters of every tool the task allows, then the
        user channel."""
        return [t.schema["function"] for t in self.sandbox.tools.values()] + [USER_TOOL_SPEC]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[bool, str]:
        """Run one call; (ok, what the agent sees). Never raises on bad calls."""
        if self.error or self.termination:
            why = "the user ended it" if self.termination else "a system error ended it"
            return False, EPISODE_OVER.format(why=why)
        if name == USER_TOOL:
            return await self.message_user(arguments or {})
        call = ToolCall.of(name, arguments or {},
                           f"call_{sum(isinstance(m, ToolMessage) for m in self.transcript)}")
        t = time.perf_counter()
        result = self.sandbox.call(name, arguments or {})
        self.timing["tools_s"] += time.perf_counter() - t
        self.transcript.append(AssistantMessage(None, tool_calls=[call]))
        self.transcript.append(ToolMessage(call.id, name, result.content))
        return result.ok, result.content

    async def message_user(self, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Say `message` to the user; their reply, or USER_LEFT when they end the conversation."""
        text = arguments.get("message")
        if not isinstance(text, str) or not text.strip() or set(arguments) != {"message"}:
            return False, orjson.dumps({"error": f"{USER_TOOL} takes one argument, `message`: "
                                                 "the text to send"}).decode()
        self.transcript.append(AssistantMessage(text))
        t = time.perf_counter()
        try:
            reply = await self.user.reply(self.transcript)
        except Exception as e:  # noqa: BLE001 - the user's endpoint failed; a bug costs one episode
            self.error = _user_failure(e)
            return False, EPISODE_OVER.format(why="the simulated user failed: a system error")
        finally:
            self.timing["user_s"] += time.perf_counter() - t
        if reply == STOP:
            self.termination = "user_stop"
            return True, USER_LEFT
        self.transcript.append(UserMessage(reply))
        return True, reply

    def abandon(self, idle_s: float) -> None:
        """The client went silent for `idle_s` without ending the session: unless the user had
        already ended the conversation, the episode is a system error (resume runs it again), as
        rollout records an agent endpoint that stopped answering."""
        if not (self.error or self.termination):
            self.error = ErrorInfo("timeout", f"the MCP client sent nothing for {idle_s:g}s and "
                                              "never ended the session")

    def record(self) -> dict[str, Any]:
        """The episode record (schemas/episode.schema.json), as rollout writes it."""
        task, failed = self.task, self.error is not None
        usage = {"user": msgspec.structs.replace(self.user.usage)}
        timing = {k: round(v, 4) for k, v in self.timing.items()}
        return Episode(
            episode_id=self.episode_id, task_id=task.id,
            domain=self.domain.name, attempt=self.attempt, policy=self.policy,
            status="system_error" if failed else "ok", error=self.error,
            termination=None if failed else self.termination or "agent_done",
            messages=self.transcript, turns=[], changes=table_changes(self.sandbox.changes()),
            seed_digest=self.sandbox.seed_digest, usage=usage, cost_usd=self.price(usage),
            timing={**timing, "total_s": round(time.perf_counter() - self.started, 4)}).record()

    def close(self) -> None:
        self.sandbox.close()


def mcp_server(lifespan=None):
    """The MCP low-level server (the mcp 2.x handler API). Its handlers serve the SandboxSession
    that the connection was started with as its lifespan state: one server, any number of
    sessions."""
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool.model_validate({"name": s["name"], "description": s.get("description", ""),
                                       "inputSchema": s["parameters"]})
            for s in ctx.lifespan_context.tool_specs()])

    async def call_tool(ctx, params) -> types.CallToolResult:
        ok, content = await ctx.lifespan_context.call(params.name, params.arguments)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": content}], "isError": not ok})

    return Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool,
                  **({"lifespan": lifespan} if lifespan else {}))


def session_options(server, session: SandboxSession):
    """The server's initialization options with this session's instructions."""
    return server.create_initialization_options().model_copy(
        update={"instructions": instructions(session.domain, session.task)})


def serve_stdio(session: SandboxSession, log_file) -> dict[str, Any]:
    """Serve one session over stdin/stdout until the client ends it; write and return the episode
    (`log_file`: an EpisodeLog)."""
    try:
        import anyio
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise EndstateError("rollout serve-mcp needs the mcp SDK: pip install 'endstate[mcp]'") from None

    @asynccontextmanager
    async def holding(_server):
        try:
            yield session
        finally:
            session.user.close()

    server = mcp_server(lifespan=holding)

    async def run() -> None:
        # The MCP channel is the records stream (core.stdio): whatever else writes to stdout
        # goes to stderr, so stray output cannot corrupt the protocol.
        channel = io.TextIOWrapper(stdio.records_out(), encoding="utf-8", write_through=True)
        try:
            async with stdio_server(stdout=anyio.wrap_file(channel)) as (read, write):
                await server.run(read, write, session_options(server, session))
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
        log_file.append(episode)
        print(f"serve-mcp: {describe(episode)}; episode written to {log_file.path}", file=sys.stderr)
    return episode


def describe(episode: dict[str, Any]) -> str:
    """One line about a written episode, for the log on stderr."""
    calls = sum(1 for m in episode["messages"] if m["role"] == "tool")
    said = sum(1 for m in episode["messages"] if m["role"] == "assistant" and m.get("content"))
    ending = episode["termination"] or f"system_error ({episode['error']['kind']})"
    return (f"{episode['task_id']} attempt {episode['attempt']}: {calls} tool call(s), "
            f"{said} message(s) to the user, {ending}")
