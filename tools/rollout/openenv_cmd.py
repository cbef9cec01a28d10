"""The `rollout serve-openenv` command: endstate's tasks served as an OpenEnv environment
(openenv_env.py) over OpenEnv's own FastAPI server, for OpenEnv clients and TRL's GRPOTrainer."""

from __future__ import annotations

import asyncio
import functools
import signal
import sys
from dataclasses import dataclass

import click
import orjson

from endstate.core.cli import ranges
from endstate.core.cli.command import bundled, common_options, judge_options
from endstate.core.cli.run_options import IDLE_WITHOUT, refuse_idle_flags, task_selection
from endstate.core.console.progress import note
from endstate.core.episode.plan import refuse_unplayable, runnable_tasks
from endstate.core.episode.preflight import check_endpoints, needs_judge
from endstate.core.errors import EndstateError
from endstate.rollout.serve_cmd import SessionMaker, UserSide, _address, user_side_options

DEFAULT_ADDRESS = "127.0.0.1:8000"


@dataclass
class Serving:
    """Where and how the environment is served, and where its episodes go."""

    address: str
    max_sessions: int
    session_timeout: float
    save_file: str | None


@click.command("serve-openenv")
@click.argument("task_files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--http", "address", metavar="HOST:PORT", default=DEFAULT_ADDRESS, show_default=True,
              callback=_address, help="Where to serve: OpenEnv clients connect to "
              "ws://HOST:PORT/ws (no authentication: keep it on 127.0.0.1 unless the network is "
              "yours).")
@click.option("--max-sessions", type=ranges.count(1), default=16, show_default=True,
              help="OpenEnv sessions (connections) open at once, each with its own sandbox; one "
                   "more is refused with CAPACITY_REACHED.")
@click.option("--session-timeout", type=ranges.SECONDS, default=1800.0, show_default=True,
              help="Seconds a session may stay idle before it is closed (its open episode "
                   "discarded).")
@click.option("--save-episodes", "save_file", type=click.Path(dir_okay=False),
              help="Append each ended episode's record here, for `grade`, `grade audit` and "
                   "evalstats.")
@task_selection
@click.option("--model", default="openenv-client", show_default=True,
              help="The agent under evaluation or training (the episodes' policy.model).")
@user_side_options
@judge_options
@common_options(domains=True, skip_invalid=True, quiet=True)
@bundled("user_side", UserSide)
@bundled("serving", Serving)
def serve_openenv(task_files, serving: Serving, select, user_side: UserSide, judge,
                  domains, skip, quiet):
    """Serve tasks as an OpenEnv environment: each OpenEnv session (EnvClient connection) gets a
    fresh sandbox of a task at every reset (`task_id`, else the next one), takes one agent turn
    per step (a tool call, a message to the simulated user, or nothing more to say), and ends as
    a rollout episode does, its last observation carrying the reward and the graded checks.
    Needs: pip install 'endstate[openenv]'; docs/openenv.md.

    \b
    Examples:
      rollout serve-openenv tasks/bench/retail.jsonl --save-episodes served.jsonl
      grade served.jsonl | grade audit --summary
    """
    refuse_idle_flags({"user_kind": user_side.user_kind},
                      {k: IDLE_WITHOUT[k] for k in ("user_urls", "user_model", "user_key_env")})
    from endstate.core.grading.grader import Grader

    cfg = user_side.run_config()
    grader = Grader(domains, judge)
    tasks = runnable_tasks(task_files, domains, skip, grading=grader.task_problem,
                           select=select)
    refuse_unplayable(tasks, user_side.user_kind)
    check_endpoints(cfg, judge if needs_judge(tasks) else None, quiet=quiet, enabled=cfg.preflight)
    served = served_tasks(tasks, domains, SessionMaker(cfg, backend="openenv"), grader,
                          serving.save_file)
    serve(served, serving.address, max_sessions=serving.max_sessions,
          session_timeout=serving.session_timeout)


def served_tasks(tasks, domains, new_session, grader, save_file=None):
    """The shared side of the environment; with `save_file`, attempts go on after its own."""
    try:
        from endstate.rollout.openenv_env import Served
    except ImportError:
        raise EndstateError("rollout serve-openenv needs openenv-core: pip install "
                            "'endstate[openenv]'") from None
    from endstate.rollout.episode_log import EpisodeLog

    log = EpisodeLog(save_file, exclusive=True) if save_file else None
    return Served(tasks, domains, new_session, grader, log, _attempts_after(log))


def _attempts_after(log) -> dict[str, int]:
    """Per task, the attempt number after the last one the file holds (a cut last line dropped)."""
    if log is None:
        return {}
    log.written_keys()
    after: dict[str, int] = {}
    with open(log.path, "rb") as fh:
        for line in filter(bytes.strip, fh):
            record = orjson.loads(line)
            after[record["task_id"]] = max(after.get(record["task_id"], 0), record["attempt"] + 1)
    return after


def openenv_app(served, *, max_sessions: int, session_timeout: float | None):
    """OpenEnv's FastAPI app over the environment: WebSocket sessions at /ws, bounded."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.types import ConcurrencyConfig

    from endstate.rollout.openenv_env import EndstateEnvironment
    from endstate.rollout.openenv_types import EndstateAction, EndstateObservation

    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout)
    return QuietDisconnects(create_fastapi_app(functools.partial(EndstateEnvironment, served),
                                               EndstateAction, EndstateObservation,
                                               concurrency_config=config))


class QuietDisconnects:
    """openenv-core 0.3.0 closes a session's WebSocket after the client has closed it, and the
    WebSocketDisconnect that raises would be logged as a server error with a traceback at every
    ordinary disconnect. The session is destroyed (sandbox closed) before that close, so the
    exception carries nothing to act on."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def serve(served, address: str, *, max_sessions: int, session_timeout: float | None) -> None:
    """Serve until SIGINT or SIGTERM; then close the user's and the judge's connections."""
    import uvicorn

    from endstate.rollout.gateway import listen

    app = openenv_app(served, max_sessions=max_sessions, session_timeout=session_timeout)
    sock = listen(address)
    host, port = sock.getsockname()[:2]
    domains = sorted({t["domain"] for t in served.tasks})
    note(f"serve-openenv: {len(served.tasks)} task(s) of {', '.join(domains)}; serving OpenEnv at "
         f"http://{f'[{host}]' if ':' in host else host}:{port} (sessions: ws://…/ws, at most "
         f"{max_sessions}){f'; episodes to {served.log.path}' if served.log else ''}")
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning",
                                           access_log=False))

    async def main() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            served.new_session.close()
            served.grader.close()

    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGTERM, previous)
