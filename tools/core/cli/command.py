"""What every endstate command line shares: stdout for records only, SIGPIPE, tracebacks only
with -v, --version, common options."""

from __future__ import annotations

import dataclasses
import errno
import functools
import gc
import os
import signal
import sys
from collections.abc import Callable

import click
from click.core import ParameterSource

from endstate import __version__
from endstate.core.cli import ranges
from endstate.core.cli.extras import missing_extra
from endstate.core.console import stdio
from endstate.core.errors import EXIT_CODES_HELP, EndstateError, ExitCode
from endstate.core.records.jsonl import SkipLog
from endstate.core.wire.keys import ROLE_KEYS, SHARED, Role, resolve_keys
from endstate.core.wire.urls import url_problem

DOMAINS_ENV = "ENDSTATE_DOMAINS"
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EIO, errno.EFBIG}


def run(cli: click.Command, collect_cycles: bool = True) -> Callable[[], None]:
    """Wrap a click command as a console-script entry point. `collect_cycles=False` turns the
    cycle collector off, for a one-shot reducer (bucket, evalstats): it keeps ~10^5 acyclic
    objects (tallies, records) alive until it exits, which reference counting frees anyway and
    the collector's repeated passes over cost 10% of its time."""

    def main() -> None:
        if not collect_cycles:
            gc.disable()
        # Default SIGPIPE: `grade ... | head` ends quietly instead of raising BrokenPipeError.
        if hasattr(signal, "SIGPIPE"):
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        verbose = "-v" in sys.argv[1:] or "--verbose" in sys.argv[1:]
        _wrap_each_command(cli)
        try:
            cli.main(standalone_mode=True)
        except OSError as e:  # a full disk, a vanished folder: not a bug, nothing to rerun with -v
            if verbose:
                raise
            where = e.filename or ("writing to stdout" if e.errno in _OUTPUT_ERRNOS else None)
            click.echo(f"I/O error{f' ({where})' if where else ''}: {e.strerror or e}", err=True)
            sys.exit(ExitCode.IO)
        except Exception as e:  # a bug, not a user error: those are ClickExceptions
            if verbose:
                raise
            click.echo(f"internal error: {type(e).__name__}: {e} (rerun with -v for the traceback)",
                       err=True)
            sys.exit(ExitCode.INTERNAL)

    return main


def _wrap_each_command(command: click.Command) -> None:
    """Reserve stdout for records (core.stdio) as each leaf command starts: after parsing, so
    that --help and --version still print there, and before anything loads a library. Ctrl-C
    inside a command exits 130; click's standalone mode would turn it into "Aborted!" and 1."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _wrap_each_command(sub)
        return
    callback = command.callback

    @functools.wraps(callback)
    def reserved(*args, **kwargs):
        stdio.reserve_stdout()
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            raise EndstateError("interrupted", ExitCode.INTERRUPTED) from None
        except ModuleNotFoundError as e:  # a light install on a path that needs an extra
            usage = missing_extra(e, click.get_current_context().command_path)
            if usage is None:
                raise
            raise usage from None

    command.callback = reserved


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to the default one:
    `grade FILE` means `grade score FILE`."""

    def __init__(self, *args, default: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-") \
                and not os.path.exists(args[0]):
            # `grade valdate x` must not grade a file called "valdate"
            raise click.UsageError(f"{args[0]!r} is neither a command ({', '.join(self.commands)}) "
                                   "nor a file", ctx)
        if not args or (args[0] not in self.commands and args[0] not in OWN_OPTIONS):
            args = [self.default, *args]
        return super().parse_args(ctx, args)


OWN_OPTIONS = ("-h", "--help", "--version")  # what a default group answers itself
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
version_option = click.version_option(__version__, "--version", message="%(prog)s (endstate) %(version)s")
quiet_option = click.option("-q", "--quiet", is_flag=True,
                            help="Errors and warnings only on stderr: no progress, no summary.")


verbose_option = click.option(
    "-v", "--verbose", is_flag=True, expose_value=False, help="Show tracebacks of internal errors."
)
def _skip_log(ctx: click.Context, param, wanted: bool) -> SkipLog | None:
    """--skip-invalid hands the command a skip log, reported on stderr when the command ends."""
    if not wanted:
        return None
    skip = SkipLog()
    ctx.call_on_close(skip.report)
    return skip


skip_invalid_option = click.option(
    "--skip-invalid", "skip", is_flag=True, callback=_skip_log,
    help="Process the valid records and report the invalid lines on stderr instead of stopping.",
)


def _domains(ctx: click.Context, param, folders: tuple[str, ...]):
    from endstate.core.env.domain import Domains  # here: bucket and evalstats never load a domain

    return Domains([*folders, *env_domain_dirs()])


def domains_option(fn):
    """--domains hands the command its Domains: these folders, then $ENDSTATE_DOMAINS's."""
    return click.option(
        "--domains", "domains", multiple=True, type=click.Path(file_okay=False, exists=True),
        callback=_domains,
        help=f"A folder of domain folders, or one domain folder (repeatable). "
        f"Also read from ${DOMAINS_ENV} (colon-separated).",
    )(fn)


def env_domain_dirs() -> list[str]:
    return [p for p in os.environ.get(DOMAINS_ENV, "").split(os.pathsep) if p]


def judge_options(fn):
    """--judge-model, --judge-base-url, --judge-cache and --judge-key-env, handed to the command
    as one `judge` (a Judge, or None when no judge is configured). The judge's key follows
    core.wire.keys: after the run's agent and user (`cfg`, where the command has one)."""
    @functools.wraps(fn)
    def with_judge(*args, judge_model, judge_base_url, judge_cache, judge_key_env, **kwargs):
        # here, not at the top: the tools without a judge skip its imports
        from endstate.core.grading.judge import Judge

        cfg = kwargs.get("cfg")  # probe's agent and user: the shared key may go to their hosts
        url = judge_base_url or os.environ.get("ENDSTATE_JUDGE_BASE_URL")
        judge_named = url and (judge_model or os.environ.get("ENDSTATE_JUDGE_MODEL"))
        roles = [*(cfg.roles() if cfg is not None else []),
                 Role("judge", [url] if judge_named and not url_problem(url) else [], judge_key_env)]
        key = role_keys(roles, only="judge").get("judge")
        judge = Judge.from_options(judge_model, judge_base_url, judge_cache, api_key=key)
        if judge is None:
            _refuse_half_a_judge()
        else:
            judge.key_env = judge_key_env  # named in the preflight's words about a refused key
        return fn(*args, judge=judge, **kwargs)

    for option in (
        click.option("--judge-key-env", type=ranges.KEY_ENV, default=ROLE_KEYS["judge"],
                     show_default=True, help="The environment variable holding the judge "
                     f"endpoint's API key (unset: ${SHARED} where the host is the same; "
                     "docs/cli.md, API keys)."),
        click.option("--judge-cache", type=click.Path(dir_okay=False),
                     help="SQLite file of cached verdicts [default: judge.sqlite in $ENDSTATE_CACHE, "
                     "else ~/.cache/endstate]."),
        click.option("--judge-base-url", envvar="ENDSTATE_JUDGE_BASE_URL", callback=ranges.url,
                     help="OpenAI-compatible endpoint for judge checks (env ENDSTATE_JUDGE_BASE_URL)."),
        click.option("--judge-model", envvar="ENDSTATE_JUDGE_MODEL",
                     help="Model answering judge questions (env ENDSTATE_JUDGE_MODEL).")):
        with_judge = option(with_judge)
    return with_judge


def _refuse_half_a_judge() -> None:
    """A judge flag given on the command line that configures no judge: a usage error naming
    what is missing (a judge needs its model and its URL; the cache serves a judge)."""
    ctx = click.get_current_context()
    given = [name for name in ("judge_model", "judge_base_url", "judge_cache", "judge_key_env")
             if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise click.UsageError(f"{flag} has no effect without a judge (--judge-model and "
                               "--judge-base-url, or $ENDSTATE_JUDGE_MODEL and "
                               f"$ENDSTATE_JUDGE_BASE_URL): give both, or drop {flag}")


def role_keys(roles: list[Role], only: str | None = None) -> dict[str, str | None]:
    """Each role's API key (core.wire.keys), its warnings on stderr (`only`: that role's)."""
    keys, warnings = resolve_keys(roles)
    for role, warning in warnings.items():
        if only in (None, role):
            click.echo(f"warning: {warning}", err=True)
    return keys


def _refuse_api_key(ctx, param, value) -> None:
    if value is not None:  # never echoed: it is a secret
        raise click.BadParameter(
            "took the key itself, which `ps` and shell history show to anyone: export it and name "
            f"its variable instead (--agent-key-env VAR, --user-key-env VAR, --judge-key-env VAR; "
            f"by default {', '.join(ROLE_KEYS.values())}, else {SHARED})", ctx, param)


api_key_option = click.option("--api-key", hidden=True, expose_value=False, callback=_refuse_api_key)
preflight_option = click.option(
    "--preflight/--no-preflight", default=True, show_default=True,
    help="Before any work, check that every endpoint the run names (agent, user, judge) lists its "
         "model and answers a one-token request; exit 2 naming the one that does not.")


def parse_prices(ctx, param, values) -> dict[str, tuple[float, float]]:
    """--price MODEL=IN,OUT (USD per million tokens, repeatable), the same in every tool."""
    prices = {}
    for value in values:
        model, _, rest = value.rpartition("=")
        try:
            prompt, completion = (float(x) for x in rest.split(","))
        except ValueError:
            raise click.BadParameter(
                f"{value!r}: expected MODEL=IN_PER_MTOK,OUT_PER_MTOK, e.g. gpt-4o=2.5,10") from None
        # nan passes `< 0`, and nan or 1e309 (inf) priced every total null without a word
        if not model or not all(0 <= p <= ranges.MAX_PRICE for p in (prompt, completion)):
            raise click.BadParameter(f"{value!r}: expected MODEL=IN_PER_MTOK,OUT_PER_MTOK with "
                                     f"prices from 0 to {ranges.MAX_PRICE:g}, e.g. gpt-4o=2.5,10")
        prices[model] = (prompt, completion)
    return prices


def tool_group(default: str | None = None):
    """A tool's root group: -h, --version and the exit-code table in its help; `default` names
    the command that a first argument which is no command runs (`grade FILE`)."""
    kind = {"cls": DefaultGroup, "default": default} if default else {}
    return lambda fn: click.group(**kind, context_settings=CONTEXT_SETTINGS,
                                  epilog=EXIT_CODES_HELP)(version_option(fn))


def tool_command(fn):
    """A tool that is one command (bucket, probe): as tool_group, without subcommands."""
    return click.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP)(version_option(fn))


def common_options(*, domains: bool = False, skip_invalid: bool = False, quiet: bool = False):
    """The flags many commands share, in one order: --domains, --skip-invalid, --quiet, -v."""
    chosen = [o for o, wanted in ((domains_option, domains), (skip_invalid_option, skip_invalid),
                                  (quiet_option, quiet), (verbose_option, True)) if wanted]

    def decorate(fn):
        for option in reversed(chosen):
            fn = option(fn)
        return fn

    return decorate


def bundled(name: str, cls: type):
    """Hand a command the values of its flags named like the fields of the dataclass `cls` as one
    `name=cls(...)`, so that a command with many flags takes one settings object. Put it right
    above the function, below its click options."""
    fields = [f.name for f in dataclasses.fields(cls)]

    def decorate(fn):
        @functools.wraps(fn)
        def with_settings(*args, **kwargs):
            return fn(*args, **{name: cls(**{f: kwargs.pop(f) for f in fields}), **kwargs})
        return with_settings

    return decorate
