"""stdout carries records only.

A tool's records are written through `records_out()`. When a tool runs as a command,
`reserve_stdout()` first moves the real stdout to a private descriptor and points descriptor 1 at
stderr, so nothing else can reach the records: not a library's print, not a logging handler made
at import time (DeepSpeed's), not native code, not a child process. One place, at the descriptor
level, instead of one environment variable per library.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import BinaryIO

from endstate.core.errors import FileError

_records: BinaryIO | None = None


def reserve_stdout() -> None:
    """Keep stdout for records from now on; everything else written to it goes to stderr."""
    global _records
    if _records is not None:
        return
    if sys.stdout is None:  # started with stdout closed (`>&-`): descriptor 1 may be any file now
        raise FileError("I/O error (writing to stdout): stdout is closed; redirect it (> FILE, or "
                        "> /dev/null) instead of closing it")
    sys.stdout.flush()
    _records = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    atexit.register(_flush_at_exit)


def records_out() -> BinaryIO:
    """Where records go: the reserved stdout, or sys.stdout when nothing reserved it (a tool
    called in-process, e.g. by click's CliRunner)."""
    return _records if _records is not None else sys.stdout.buffer


def echo(text: str) -> None:
    """Write requested text output (a table, a listing) to the records stream, with a newline."""
    out = records_out()
    out.write(text.encode() + (b"" if text.endswith("\n") else b"\n"))
    out.flush()


def flush() -> None:
    """Flush every standard stream, e.g. before forking, so no child writes a copy of a buffer."""
    for stream in (_records, sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _flush_at_exit() -> None:
    try:
        _records.flush()
    except (OSError, ValueError):  # the reader went away (`| head`), a full disk (reported), closed
        pass
