"""The `rollout serve-mcp` command: one task over stdio (mcp_server.py), or a campaign of (task,
attempt) keys over streamable HTTP (gateway.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import click
from click.core import ParameterSource

from endstate.core.cli import ranges
from endstate.core.cli.command import (
    api_key_option,
    bundled,
    common_options,
    parse_prices,
    preflight_option,
    role_keys,
)
from endstate.core.cli.run_options import (
    IDLE_WITHOUT,
    needs_user_model,
    refuse_idle_flags,
    task_selection,
    user_option,
)
from endstate.core.console.progress import Progress, note
from endstate.core.episode.config import RunConfig, UserMaker, price_of
from endstate.core.episode.plan import (
    parse_shard,
    plan,
    refuse_unplayable,
    runnable_tasks,
    shard_of,
)
from endstate.core.episode.preflight import check_endpoints
from endstate.core.episode.runtime import EPISODE_COUNTS
from endstate.core.errors import EndstateError
from endstate.core.records.structs import Policy, Task
from endstate.core.wire.keys import ROLE_KEYS, SHARED

TOKEN_ENV = "ENDSTATE_MCP_TOKEN"
HTTP_ONLY = ("repeats", "resume", "shard", "session_timeout")


@dataclass
class UserSide:
    """The simulated user behind send-message-to-user (rollout's --user flags, same meaning) and
    the agent recorded as policy.model."""

    model: str
    user_kind: str
    user_urls: tuple[str, ...]
    user_model: str | None
    user_key_env: str
    timeout: float
    retries: int
    prices: dict[str, tuple[float, float]]
    preflight: bool

    def run_config(self) -> RunConfig:
        cfg = RunConfig(model=self.model, user=self.user_kind, user_urls=list(self.user_urls),
                        user_model=self.user_model, user_key_env=self.user_key_env,
                        timeout=self.timeout, retries=self.retries, prices=self.prices,
                        preflight=self.preflight)
        cfg.user_key = role_keys(cfg.roles()).get("user")
        return cfg


@dataclass
class GatewaySettings:
    """--http and the flags only the gateway takes (HTTP_ONLY)."""

    address: str | None
    repeats: int
    resume: bool
    shard: str | None
    token: str | None
    session_timeout: float


def user_side_options(fn):
    """The simulated user behind send-message-to-user: rollout's --user flags, same meaning."""
    for option in reversed([
        user_option,
        click.option("--user-url", "user_urls", multiple=True, envvar="ENDSTATE_USER_URLS",
                     callback=ranges.urls, help="--user llm: OpenAI-compatible base URL (repeatable)."),
        click.option("--user-model", envvar="ENDSTATE_USER_MODEL", help="--user llm: model name."),
        click.option("--user-key-env", type=ranges.KEY_ENV, default=ROLE_KEYS["user"],
                     show_default=True, help="--user llm: the environment variable holding the "
                     f"user endpoint's API key (unset: ${SHARED})."),
        api_key_option,
        preflight_option,
        click.option("--timeout", type=ranges.SECONDS, default=60.0,
                     show_default=True, help="Seconds per call of the user's model."),
        click.option("--retries", type=ranges.RETRIES, default=4, show_default=True,
                     help="Calls per request in all, with backoff, before system_error."),
        click.option("--price", "prices", multiple=True, callback=parse_prices, metavar="MODEL=IN,OUT",
                     help="MODEL=IN,OUT in USD per million tokens, for the user's cost_usd."),
    ]):
        fn = option(fn)
    return fn


def _address(ctx, param, address: str | None) -> str | None:
    """--http HOST:PORT, the port a number from 0 (any free one) to 65535."""
    if address is None:
        return None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{address!r}: give HOST:PORT with a port from 0 to 65535, e.g. "
                                 "127.0.0.1:8765 (this machine only) or 0.0.0.0:8765 (every "
                                 "interface)", ctx, param)
    return address


def _token(ctx, param, token: str | None) -> str | None:
    """A bearer token a client can send as it is: visible ASCII, no spaces (a blank one, or one
    with spaces around it, was accepted and then matched nothing)."""
    if token is not None and not re.fullmatch(r"[\x21-\x7e]+", token):
        raise click.BadParameter("the token must be visible ASCII characters without spaces, e.g. "
                                 f"export {TOKEN_ENV}=$(openssl rand -hex 16)", ctx, param)
    return token


def _not_stdout(ctx, param, path: str) -> str:
    if path == "-":  # click.Path would make a file named "-"
        raise click.BadParameter("takes a file, not stdout: stdio's stdout is the MCP channel, and "
                                 "the gateway fsyncs and --resumes its file; follow it with "
                                 "`tail -f FILE`", param_hint="--out")
    return path


@click.command("serve-mcp")
@click.argument("task_files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False),
              callback=_not_stdout,
              help="Append each episode here when its session ends (stdio: stdout is the MCP channel).")
@click.option("--http", "address", metavar="HOST:PORT", callback=_address,
              help="Serve MCP over streamable HTTP at http://HOST:PORT/mcp, one (task, attempt) key "
                   "per session [default: one task over stdio].")
@click.option("-n", "--repeats", type=ranges.REPEATS, default=1, show_default=True,
              help="--http: attempts per task.")
@click.option("--resume", is_flag=True, help="--http: continue --out, skipping (task_id, attempt) keys "
                                             "that already have a clean episode there.")
@click.option("--shard", callback=ranges.shard,
              help="--http: I/N: serve only every N-th task starting at I.")
@click.option("--token", envvar=TOKEN_ENV, callback=_token,
              help=f"--http: the bearer token clients must send (env {TOKEN_ENV}): visible ASCII, "
                   "no spaces.")
@click.option("--session-timeout", type=ranges.SECONDS, default=1800.0,
              show_default=True, help="--http: seconds a session may stay idle before its episode is "
                                      "written as abandoned.")
@click.option("--attempt", type=ranges.count(0), default=0, show_default=True,
              help="stdio: attempt number recorded in the episode.")
@task_selection
@click.option("--model", default="mcp-client", show_default=True,
              help="The agent under evaluation, recorded as the episodes' policy.model.")
@user_side_options
@common_options(domains=True, skip_invalid=True, quiet=True)
@bundled("user_side", UserSide)
@bundled("http", GatewaySettings)
def serve_mcp(task_files, out_file, http: GatewaySettings, attempt, select,
              user_side: UserSide, domains, skip, quiet):
    """Serve fresh sandboxes of tasks to MCP clients: the task's tools with their JSON schemas,
    and `send-message-to-user`, the channel to the task's simulated user. Each session's episode
    (transcript and database diff) is appended to --out, ready for `grade`.

    Over stdio (the default) it serves one task to the client that started it. With --http it is
    a gateway for many concurrent clients: each MCP session gets the next (task, attempt) key of
    TASK_FILES × -n; the gateway exits 0 once every key's episode is written.
    Needs: pip install 'endstate[mcp]'.

    \b
    Examples:
      rollout serve-mcp tasks/bench/retail.jsonl --task retail-cancel-pending --out mcp.jsonl
      ENDSTATE_MCP_TOKEN=s3cret rollout serve-mcp --http 127.0.0.1:8765 tasks/bench/retail.jsonl \\
          -n 4 --out gateway.jsonl          # then point the agent at http://127.0.0.1:8765/mcp
      grade gateway.jsonl | evalstats --expect-tasks tasks/bench/retail.jsonl --expect-repeats 4
    """
    _check_mode(http.address)
    refuse_idle_flags({"user_kind": user_side.user_kind},
                      {k: IDLE_WITHOUT[k] for k in ("user_urls", "user_model", "user_key_env")})
    cfg = user_side.run_config()
    new_session = SessionMaker(cfg)
    tasks = runnable_tasks(task_files, domains, skip, select=select)
    refuse_unplayable(tasks, user_side.user_kind)
    check_endpoints(cfg, quiet=quiet, enabled=cfg.preflight)
    if http.address:
        _serve_gateway(tasks, domains, new_session, address=http.address, out_file=out_file,
                       repeats=http.repeats, resume=http.resume, shard=parse_shard(http.shard),
                       token=http.token, session_timeout=http.session_timeout, quiet=quiet)
    else:
        _serve_one(tasks, domains, new_session, out_file, attempt)


def _check_mode(address: str | None) -> None:
    """Flags of the other mode are a usage error, not silently ignored."""
    ctx = click.get_current_context()
    given = [f"--{name.replace('_', '-')}" for name in (HTTP_ONLY if not address else ("attempt",))
             if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{', '.join(given)} only {'without' if address else 'with'} --http")


class SessionMaker:
    """(domain, task, attempt) -> a fresh SandboxSession with the task's simulated user; `close`
    closes the connections of the run's LLM users."""

    def __init__(self, cfg: RunConfig, backend: str = "mcp"):
        needs_user_model(cfg.user, cfg.user_urls, cfg.user_model)
        self.make_user, self.price = UserMaker(cfg), price_of(cfg)
        self.policy = Policy(model=cfg.model, backend=backend)

    def __call__(self, domain, record: dict, attempt: int):
        from endstate.rollout.mcp_server import SandboxSession

        task = Task.of(record)
        return SandboxSession(domain, task, attempt, self.make_user(task), self.price, self.policy)

    def close(self) -> None:
        self.make_user.close()


def _serve_one(tasks, domains, new_session, out_file, attempt) -> None:
    from endstate.rollout.episode_log import EpisodeLog
    from endstate.rollout.mcp_server import serve_stdio

    if len(tasks) != 1:
        raise click.UsageError(f"{len(tasks)} tasks selected: pick one with --task ID (or serve "
                               "them all with --http)")
    task = tasks[0]
    serve_stdio(new_session(domains[task["domain"]], task, attempt), EpisodeLog(out_file))


def _serve_gateway(tasks, domains, new_session, *, address, out_file, repeats, resume, shard,
                   token, session_timeout, quiet) -> None:
    from endstate.rollout.episode_log import EpisodeLog
    from endstate.rollout.gateway import MCP_PATH, Gateway, listen, serve_http

    if not token:
        raise EndstateError(f"--http needs a bearer token: --token TOKEN or {TOKEN_ENV}=TOKEN "
                            f"(e.g. export {TOKEN_ENV}=$(openssl rand -hex 16)); clients send "
                            "`Authorization: Bearer TOKEN`")
    log = EpisodeLog(out_file, exclusive=True)
    existing = 0 if resume else log.records()
    if existing:
        raise EndstateError(f"{out_file} already holds {existing} episode(s): pass --resume to "
                            "serve only the keys it lacks, or give another --out")
    tasks = shard_of(tasks, shard)
    done = log.written_keys() if resume else set()
    keys = plan(tasks, repeats, done)
    if not keys:
        note(f"serve-mcp: nothing to serve: every key of {len(tasks)} task(s) × {repeats} has a "
             f"clean episode in {out_file}")
        return
    sock = listen(address)
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"
    written = len(tasks) * repeats - len(keys)  # not len(done): it may hold other tasks' keys
    note(f"serve-mcp: {len(keys)} key(s) of {len(tasks)} task(s) × {repeats}"
         f"{f' ({written} already written)' if written else ''}; serving MCP at {url}; "
         f"episodes to {out_file}")
    progress = Progress(len(keys), "serve-mcp", quiet=quiet, counts=EPISODE_COUNTS)
    gateway = Gateway(keys, domains, log, token=token, session_timeout=session_timeout,
                      new_session=new_session, progress=progress, quiet=quiet)
    serve_http(gateway, sock)
