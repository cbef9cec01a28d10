"""`rollout serve-mcp --http`: the MCP gateway. Any number of MCP clients (the agent under
evaluation) connect over streamable HTTP; each MCP session gets a fresh sandbox for the next
(task, attempt) key of the plan (core.tasks: the keys, shards and --resume of probe), the task's
tools and the channel to its simulated user (mcp_server.py). A key is handed out once.

A session's episode is appended to --out (episode_log.py: one whole line, fsynced) when the client
ends the session (DELETE, which is answered once the episode is on disk) or when it has been idle
for --session-timeout seconds (a vanished client: a system error unless the user had ended the
conversation, and --resume runs it again). Sessions still open when the gateway is stopped are not
written: --resume runs their keys again. When every key is written the gateway exits 0; a client
asking for a session after the last key was handed out gets HTTP 410 and a JSON-RPC error saying
so. Every request needs `Authorization: Bearer TOKEN` (401 otherwise).

Sandboxes hold only their diff (core.sandbox), so one process serves hundreds of sessions: one
event loop, tool calls in it (SQLite, sub-millisecond), appends in worker threads.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import anyio

from endstate.core.console.progress import Progress, episode_counts, note
from endstate.core.env.domain import Domains
from endstate.core.errors import EndstateError
from endstate.core.records.structs import ErrorInfo
from endstate.rollout.episode_log import EpisodeLog
from endstate.rollout.mcp_server import SandboxSession, describe, mcp_server, session_options

log = logging.getLogger("endstate")

MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
GRACE_S = 3  # at shutdown, for open HTTP connections (live sessions' streams) to close


@dataclass(eq=False)
class _Open:
    """A session the gateway serves: its transport and the episode it builds."""

    key: tuple[dict[str, Any], int]
    transport: Any  # mcp StreamableHTTPServerTransport
    episode: SandboxSession
    established: bool = False  # the client got its session id (the opening request succeeded)
    written: anyio.Event = field(default_factory=anyio.Event)
    write_failed: bool = False  # the DELETE then answers 500, not success


class Gateway:
    """The ASGI app: bearer-token check, then MCP sessions, each one key of the plan."""

    def __init__(self, keys: list[tuple[dict, int]], domains: Domains, log: EpisodeLog, *,
                 token: str, session_timeout: float, new_session, progress: Progress,
                 quiet: bool = False):
        self.plan, self.total = deque(keys), len(keys)
        self.domains, self.log, self.new_session = domains, log, new_session
        self.token = token.encode()
        self.session_timeout, self.progress, self.quiet = session_timeout, progress, quiet
        self.server = mcp_server()
        self.sessions: dict[str, _Open] = {}
        self.finished = asyncio.Event()  # every key written, or a write failed: stop serving
        self.failure: BaseException | None = None
        self.unwritten = 0  # sessions open when the gateway stopped
        self._tasks: anyio.abc.TaskGroup | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        scheme, _, credentials = headers.get(b"authorization", b"").partition(b" ")
        # the scheme is case-insensitive (RFC 7235); the token is compared in constant time
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self.token):
            return await _error(scope, receive, send, 401, "missing or wrong bearer token: send "
                                "`Authorization: Bearer TOKEN` (the gateway's --token)",
                                {"WWW-Authenticate": "Bearer"})
        if scope["path"].rstrip("/") != MCP_PATH:
            return await _error(scope, receive, send, 404, f"the MCP endpoint is {MCP_PATH}")
        session_id = headers.get(SESSION_HEADER, b"").decode()
        if not session_id:
            return await self._open(scope, receive, send)
        if session_id in self.sessions:
            return await self._serve(self.sessions[session_id], scope, receive, send)
        await _error(scope, receive, send, 404, "Session not found (ended, timed out, or from "
                     "an earlier gateway): start a new session")

    async def _lifespan(self, receive, send) -> None:
        """The task group that session servers run in lives as long as the app."""
        await receive()  # lifespan.startup
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            tasks.cancel_scope.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    async def _open(self, scope, receive, send) -> None:
        """A request without a session id opens a session on the next key of the plan."""
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        if not self.plan:
            return await _error(scope, receive, send, 410, f"this gateway has handed out every "
                                f"(task, attempt) key of its plan ({self.total}); nothing is left "
                                "to evaluate")
        task, attempt = key = self.plan.popleft()
        if not self.plan and not self.quiet:
            note(f"serve-mcp: every key is handed out; the gateway stops when the "
                 f"{len(self.sessions) + 1} open session(s) end")
        try:
            episode = self.new_session(self.domains[task["domain"]], task, attempt)
        except BaseException:
            self.plan.appendleft(key)  # no session was opened: the key goes back, first in line
            raise
        # JSON answers, not an SSE stream per request: ~40% less CPU a call (bench_gateway.py);
        # the tools never send progress or server requests in the middle of a call.
        transport = StreamableHTTPServerTransport(mcp_session_id=uuid4().hex,
                                                  is_json_response_enabled=True,
                                                  idle_timeout=self.session_timeout)
        entry = self.sessions[transport.mcp_session_id] = _Open(key, transport, episode)
        await self._tasks.start(self._run_session, entry)

        async def watch(message) -> None:  # the session exists once its opening request succeeds
            if message["type"] == "http.response.start":
                entry.established = message["status"] < 400
            await send(message)

        try:
            await transport.handle_request(scope, receive, watch)
        finally:
            if not entry.established:  # nothing was opened: the key goes back, first in line
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    async def _serve(self, entry: _Open, scope, receive, send) -> None:
        """A request of an open session; a DELETE is answered once the episode is written."""
        if scope["method"] != "DELETE":
            return await entry.transport.handle_request(scope, receive, send)
        held = []

        async def hold(message) -> None:
            held.append(message)

        await entry.transport.handle_request(scope, receive, hold)
        if entry.transport.is_terminated:
            await entry.written.wait()
            if entry.write_failed:
                return await _error(scope, receive, send, 500, f"this session's episode could not be "
                                    f"written ({self.failure}); the gateway stops")
        for message in held:
            await send(message)

    async def _run_session(self, entry: _Open, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        from mcp.server.runner import serve_loop

        transport, ended = entry.transport, None
        try:
            async with transport.connect() as (read, write):
                task_status.started()
                idle = transport.idle_scope or anyio.CancelScope()
                with idle:
                    await serve_loop(self.server, read, write, lifespan_state=entry.episode,
                                     session_id=transport.mcp_session_id,
                                     init_options=session_options(self.server, entry.episode))
                ended = "timeout" if idle.cancelled_caught else "closed"
        except Exception as e:  # noqa: BLE001 - a bug ends this session, never the gateway
            log.error("session %s crashed (written as system_error)", transport.mcp_session_id,
                      exc_info=e)
            entry.episode.error = ErrorInfo("internal", f"{type(e).__name__}: {e}")
            ended = "closed"
        finally:  # ended is None: the gateway is stopping (cancelled)
            self.sessions.pop(transport.mcp_session_id, None)
            with anyio.CancelScope(shield=True):
                if not transport.is_terminated:
                    await transport.terminate()
                await self._finish(entry, ended)

    async def _finish(self, entry: _Open, ended: str | None) -> None:
        try:
            if not entry.established:
                self.plan.appendleft(entry.key)
            elif ended is None:
                self.unwritten += 1
            else:
                if ended == "timeout":
                    entry.episode.abandon(self.session_timeout)
                record = entry.episode.record()
                await anyio.to_thread.run_sync(self.log.append, record)
                self._written(record)
        except Exception as e:  # noqa: BLE001 - a full disk, an unwritable record: the gateway stops
            self.failure, entry.write_failed = self.failure or e, True
            self.finished.set()
        finally:
            entry.episode.close()
            entry.written.set()
        if not self.plan and not self.sessions:
            self.finished.set()

    def _written(self, record: dict[str, Any]) -> None:
        self.progress.advance(episode_counts(record))
        if not self.quiet:
            note(f"serve-mcp: {describe(record)} ({self.progress.done}/{self.total} written)")


async def _error(scope, receive, send, status: int, message: str, headers=None) -> None:
    """An HTTP error whose body is a JSON-RPC error, so MCP clients show `message`."""
    from starlette.responses import JSONResponse

    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)


def listen(address: str) -> socket.socket:
    """A listening socket on HOST:PORT (port 0: any free one)."""
    host, _, port = address.rpartition(":")
    if not host:  # `8765` or `:8765` would listen on every interface: say so, never by default
        raise EndstateError(f"--http {address}: give HOST:PORT, e.g. 127.0.0.1:8765 (this machine "
                            "only) or 0.0.0.0:8765 (every interface)")
    try:
        infos = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
    except (ValueError, OSError) as e:
        raise EndstateError(f"--http {address}: cannot listen there ({e}); use HOST:PORT, "
                            "e.g. 127.0.0.1:8765") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _more_open_files() -> None:
    """An open session holds a socket or two: lift the soft limit on open files (often 1024) to
    the hard one, as servers for many connections do."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # an unlimited hard limit some kernels refuse: keep the soft one
            pass


def _exit_on_signal(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def serve_http(gateway: Gateway, sock: socket.socket) -> None:
    """Serve until every key is written (or a signal stops the gateway); exit status via raise."""
    import uvicorn
    from mcp.server.transport_security import (
        DEFAULT_MAX_REQUEST_BODY_SIZE,
        RequestBodyLimitMiddleware,
    )

    _more_open_files()
    app = RequestBodyLimitMiddleware(gateway, DEFAULT_MAX_REQUEST_BODY_SIZE)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning",
                                           access_log=False, timeout_graceful_shutdown=GRACE_S))

    async def main() -> None:
        async def stop_when_finished() -> None:
            await gateway.finished.wait()
            server.should_exit = True

        stopper = asyncio.ensure_future(stop_when_finished())
        try:
            await server.serve(sockets=[sock])
        finally:
            stopper.cancel()
            gateway.new_session.close()

    # uvicorn stops on SIGTERM, then raises it again: exit 143 as a killed process, but through
    # here, so the summary and the note on unwritten sessions are printed.
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGTERM, previous)
        gateway.progress.close()
        if gateway.unwritten:
            note(f"serve-mcp: {gateway.unwritten} session(s) were open when the gateway stopped; "
                 "their keys are not written: --resume runs them again")
    if gateway.failure is not None:
        raise gateway.failure
