"""What every endstate command line shares: SIGPIPE, tracebacks only with -v, common options."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

import click

from endstate.core.errors import ExitCode

DOMAINS_ENV = "ENDSTATE_DOMAINS"


def run(cli: click.Command) -> Callable[[], None]:
    """Wrap a click command as a console-script entry point."""

    def main() -> None:
        # Default SIGPIPE: `grade ... | head` ends quietly instead of raising BrokenPipeError.
        if hasattr(signal, "SIGPIPE"):
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        verbose = "-v" in sys.argv[1:] or "--verbose" in sys.argv[1:]
        try:
            cli.main(standalone_mode=True)
        except Exception as e:  # a bug, not a user error: those are ClickExceptions
            if verbose:
                raise
            click.echo(f"internal error: {type(e).__name__}: {e} (rerun with -v for the traceback)",
                       err=True)
            sys.exit(ExitCode.FAILED)

    return main


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to the default one:
    `grade FILE` means `grade score FILE`."""

    def __init__(self, *args, default: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args.insert(0, self.default)
        return super().parse_args(ctx, args)


verbose_option = click.option(
    "-v", "--verbose", is_flag=True, expose_value=False, help="Show tracebacks of internal errors."
)
skip_invalid_option = click.option(
    "--skip-invalid", is_flag=True,
    help="Process the valid records and report the invalid lines on stderr instead of stopping.",
)


def domains_option(fn):
    return click.option(
        "--domains", "domain_dirs", multiple=True, type=click.Path(file_okay=False, exists=True),
        help=f"A folder of domain folders, or one domain folder (repeatable). "
        f"Also read from ${DOMAINS_ENV} (colon-separated).",
    )(fn)


def env_domain_dirs() -> list[str]:
    return [p for p in os.environ.get(DOMAINS_ENV, "").split(os.pathsep) if p]
