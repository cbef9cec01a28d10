"""Exit codes and the errors every endstate tool reports the same way."""

from __future__ import annotations

import sys
from enum import IntEnum

import click


class ExitCode(IntEnum):
    """One table for every tool (shown in each tool's --help)."""

    OK = 0
    NO = 1  # the tool ran and the answer is "no" (unsound tasks, parity mismatches)
    USAGE = 2  # bad flags or arguments, or a setup the message says how to fix (click's own code)
    INCOMPLETE = 3  # coverage gate: keys missing, duplicated or hit by system errors
    BAD_INPUT = 4  # a record could not be parsed or validated
    IO = 5  # a file could not be opened, read or written
    NO_PROGRESS = 6  # a run that cannot make progress: grpo's error steps in a row
    INTERNAL = 70  # a bug in endstate (sysexits' EX_SOFTWARE): rerun with -v for the traceback
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as the shell reports it (not click's 1, which is "no")


EXIT_CODES_HELP = """\b
Exit codes: 0 ok, 1 the answer is no, 2 usage or setup, 3 coverage gap,
  4 bad input record, 5 I/O error, 6 no progress (grpo: error steps in a row),
  70 internal error (rerun with -v), 130 interrupted."""


class EndstateError(click.ClickException):
    """An error the user can fix. Printed as one line without a traceback."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(self.format_message(), err=True, file=file or sys.stderr)


class ConfigurationError(EndstateError):
    """A setup that cannot work (an endpoint answering 401 or 404): the run stops, whichever
    record it was on."""


class InputError(EndstateError):
    """A bad input record: the message starts with FILE:LINE."""

    exit_code = ExitCode.BAD_INPUT


class FileError(EndstateError):
    """A file that cannot be opened, read or written: the message starts with its path."""

    exit_code = ExitCode.IO
