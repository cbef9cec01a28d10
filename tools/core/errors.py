"""Exit codes and the errors every endstate tool reports the same way."""

from __future__ import annotations

import sys
from enum import IntEnum

import click


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # the tool ran and the answer is "no" (e.g. unsound tasks)
    USAGE = 2  # bad flags (click's own code)
    INCOMPLETE = 3  # coverage gate: keys missing, duplicated or hit by system errors
    BAD_INPUT = 4  # a record could not be read, parsed or validated


class EndstateError(click.ClickException):
    """An error the user can fix. Printed as one line without a traceback."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(self.format_message(), err=True, file=file or sys.stderr)


class InputError(EndstateError):
    """A bad input record: the message starts with FILE:LINE."""

    exit_code = ExitCode.BAD_INPUT
