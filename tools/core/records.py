"""JSONL in and out: stream records from FILE arguments or stdin (`-`), validate each against its
schema, and report a bad line as `FILE:LINE: what is wrong`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import click
import orjson

from endstate.core import schemas
from endstate.core.errors import InputError


@dataclass(frozen=True)
class Loc:
    """Where a record came from."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class SkipLog:
    """Lines passed over under --skip-invalid; reported on stderr, never dropped silently."""

    entries: list[tuple[Loc, str]] = field(default_factory=list)

    def add(self, loc: Loc, message: str) -> None:
        self.entries.append((loc, message))

    def report(self, err: IO[str] | None = None) -> None:
        if not self.entries:
            return
        err = err or sys.stderr
        print(f"skipped {len(self.entries)} invalid line(s):", file=err)
        for loc, message in self.entries:
            print(f"  {loc}: {message}", file=err)


def _open(path: str) -> tuple[str, IO[bytes]]:
    if path == "-":
        if sys.stdin.isatty():
            click.echo("(reading records from stdin; pass FILE arguments or pipe JSONL in)", err=True)
        return "<stdin>", sys.stdin.buffer
    try:
        return path, open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None


def read_jsonl(
    paths: Sequence[str],
    kind: str | None,
    *,
    skip: SkipLog | None = None,
) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """Yield (location, record) for every non-blank line of `paths` (`-` is stdin).

    A malformed line or a record that violates the `kind` schema raises InputError, unless
    `skip` is given: then the line is recorded there and reading goes on.
    """
    for path in paths or ["-"]:
        name, fh = _open(path)
        try:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                loc = Loc(name, lineno)
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError as e:
                    message = f"not valid JSON ({e}); each line must be one JSON object"
                else:
                    if not isinstance(record, dict):
                        message = f"expected a JSON object, got {type(record).__name__}"
                    else:
                        message = schemas.problem(kind, record) if kind else None
                        if message is None:
                            yield loc, record
                            continue
                fail(loc, message, skip)
        finally:
            if fh is not sys.stdin.buffer:
                fh.close()


def fail(loc: Loc, message: str, skip: SkipLog | None) -> None:
    """Report a bad record: raise, or note it under --skip-invalid."""
    if skip is None:
        raise InputError(f"{loc}: {message}")
    skip.add(loc, message)


def dumps(record: Any) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def write_jsonl(records: Iterable[Any], out: IO[bytes] | None = None) -> int:
    """Write one complete line per record, flushed as it goes so a killed run leaves valid JSONL."""
    out = out or sys.stdout.buffer
    n = 0
    for record in records:
        out.write(dumps(record))
        out.flush()
        n += 1
    return n
