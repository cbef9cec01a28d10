"""JSONL in and out: stream records from FILE arguments or stdin (`-`), validate each against its
schema, and report a bad line as `FILE:LINE: what is wrong`."""

from __future__ import annotations

import os
import pickle
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, pairwise
from typing import IO, Any, NamedTuple, TypeVar

import click
import msgspec
import orjson

from endstate.core.console import stdio
from endstate.core.errors import EndstateError, ExitCode, FileError, InputError
from endstate.core.records import schemas


class Loc(NamedTuple):
    """Where a record came from. A tuple, so that making one per line costs almost nothing."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_new_loc = tuple.__new__  # Loc(file, line) without the Python-level __new__: the hot path


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
        raise FileError(f"{path}: cannot open: {e.strerror}") from None


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
    return _read(paths, kind, skip, True)


def _read(paths: Sequence[str], kind: str | None, skip: SkipLog | None, with_loc: bool,
          struct: type | None = None):
    for path in paths or ["-"]:
        name, fh = _open(path)
        try:
            yield from _records(name, fh, 1, kind, skip, with_loc, struct)
        finally:
            if fh is not sys.stdin.buffer:
                fh.close()


def _records(
    name: str, lines: Iterable[bytes], first_line: int, kind: str | None, skip: SkipLog | None,
    with_loc: bool, struct: type | None = None,
) -> Iterator[Any]:
    """The per-line loop: yields (Loc, record), or bare records when not `with_loc`; records are
    dicts, or instances of `struct` (schemas.record_struct(kind, ...)) when it is given. Hot: the
    whole budget is ~1 µs a line, see bench/; a Loc per line alone costs a third of that."""
    if struct is not None:
        return _struct_records(name, lines, first_line, kind, skip, struct)
    return _dict_records(name, lines, first_line, kind, skip, with_loc)


def _dict_records(name, lines, first_line, kind, skip, with_loc) -> Iterator[Any]:
    accept = schemas.fast_check(kind) if kind else None
    loads, decode_error, new_loc = orjson.loads, orjson.JSONDecodeError, _new_loc
    for lineno, raw in enumerate(lines, first_line):
        try:
            record = loads(raw)
        except decode_error as e:
            if not raw.strip():
                continue  # blank line (orjson rejects empty input)
            fail(Loc(name, lineno), _not_json(e), skip)
            continue
        if (accept(raw) if accept else type(record) is dict) or _judge(name, lineno, kind, record, skip, raw):
            yield (new_loc(Loc, (name, lineno)), record) if with_loc else record


def _struct_records(name, lines, first_line, kind, skip, struct) -> Iterator[Any]:
    """Decode straight into the Struct (one C call a line); a line it rejects gets the dict
    path's verdict, and if the schema accepts it after all, is converted."""
    decode, rejected = schemas.struct_decoder(struct), msgspec.DecodeError
    for lineno, raw in enumerate(lines, first_line):
        try:
            record = decode(raw)
        except rejected:
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                if raw.strip():
                    fail(Loc(name, lineno), _not_json(e), skip)
                continue
            if not _judge(name, lineno, kind, record, skip, raw):
                continue
            try:
                record = schemas.as_struct(record, struct)
            except msgspec.ValidationError as e:
                fail(Loc(name, lineno), f"{kind} record: {e} (schema: schemas/{kind}.schema.json)",
                     skip)
                continue
        yield record


def _not_json(error: Exception) -> str:
    return f"not valid JSON ({error}); each line must be one JSON object"


def _judge(name: str, lineno: int, kind: str | None, record: Any, skip: SkipLog | None,
           raw: bytes) -> bool:
    """The slow verdict on a parsed line the fast path did not accept: True if valid, else report."""
    if not isinstance(record, dict):
        message = f"expected a JSON object, got {type(record).__name__}"
    else:
        message = schemas.problem(kind, record) if kind else None
        if message is None:
            if kind:
                schemas.judged_valid(kind, raw)
            return True
    fail(Loc(name, lineno), message, skip)
    return False


# --- map-reduce over big files ---------------------------------------------------------------------

State = TypeVar("State")
PARALLEL_MIN_BYTES = 32 << 20  # below this, forking costs more than it saves


def fold_jsonl(
    paths: Sequence[str],
    kind: str | None,
    tally: Callable[[Iterator[dict[str, Any]]], State],
    merge: Callable[[list[State]], State],
    *,
    skip: SkipLog | None = None,
    workers: int | None = None,
    struct: type | None = None,
) -> State:
    """`tally(records)` over the records of read_jsonl(paths, kind, skip=skip), computed on byte
    ranges of the files in forked processes when that pays (regular files, >= 32 MiB, Linux, more
    than one CPU) and combined with `merge` (given the partial states in file order).

    With `struct` (schemas.record_struct(kind, ...)) the records reach `tally` as instances of it,
    decoded in C: the fast path for big attempt files.

    `tally` must be a pure fold over the records it is given, so that merging the states of
    consecutive ranges equals the state of the whole. Errors and skipped lines are reported
    exactly as read_jsonl reports them: the first bad line in file order wins.
    """
    workers = workers if workers is not None else (os.cpu_count() or 1)
    jobs = _split(paths, workers) if workers > 1 and sys.platform == "linux" else None
    if not jobs:
        return tally(_read(paths, kind, skip, False, struct))
    skipping = skip is not None
    children = [_fork_reader(job, kind, tally, skipping, struct) for job in jobs[1:]]
    parts = [_fold_unit(unit, kind, tally, skipping, struct) for unit in jobs[0]]
    for child in children:
        parts += _reader_parts(child)
    for part in parts:  # file order: the first bad line wins
        if part.error is not None:
            raise InputError(part.error)
        if skip is not None:
            skip.entries.extend(part.skipped)
    return merge([part.state for part in parts])


class Unit(NamedTuple):
    """A byte range of one file that a reader folds; both ends are line starts."""

    path: str
    start: int
    end: int


class Part(NamedTuple):
    """What folding one Unit gave: the state, the lines skipped, or the first error instead."""

    state: Any
    skipped: list[tuple[Loc, str]]
    error: str | None


def _fork_reader(job: list[Unit], kind: str | None, tally, skipping: bool,
                 struct: type | None) -> tuple[int, int]:
    """Fold `job` in a forked process that pickles its list of Parts into a pipe; (pid, read end)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        os.close(rfd)
        code = 0
        try:
            parts = [_fold_unit(unit, kind, tally, skipping, struct) for unit in job]
            with os.fdopen(wfd, "wb") as out:
                pickle.dump(parts, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - the parent reports the missing payload
            code = 1
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def _reader_parts(child: tuple[int, int]) -> list[Part]:
    """The Parts a forked reader sent, once it has exited."""
    pid, rfd = child
    with os.fdopen(rfd, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    if not data:
        raise RuntimeError("a reader process died; rerun with --procs 1 to see why")
    return pickle.loads(data)


def _split(paths: Sequence[str], workers: int) -> list[list[Unit]] | None:
    """Cut the files into ~equal byte ranges that start at line starts and deal them, in order,
    to at most `workers` jobs. None when not worth it (stdin, small input, a special file)."""
    if not paths or "-" in paths:
        return None
    try:
        stats = [os.stat(p) for p in paths]
    except OSError:
        return None  # read_jsonl reports it
    if not all(stat.S_ISREG(st.st_mode) and os.access(p, os.R_OK) for p, st in zip(paths, stats)):
        return None
    sizes = [st.st_size for st in stats]
    total = sum(sizes)
    if total < PARALLEL_MIN_BYTES:
        return None
    target = total / workers
    units: list[Unit] = []
    for path, size in zip(paths, sizes):
        cuts = [0]
        n = max(1, round(size / target))
        with open(path, "rb") as fh:
            for i in range(1, n):
                fh.seek(int(size * i / n) - 1)
                fh.readline()  # to the start of the next line
                if cuts[-1] < fh.tell() < size:
                    cuts.append(fh.tell())
        cuts.append(size)
        units += [Unit(path, a, b) for a, b in pairwise(cuts) if b > a]
    jobs: list[list[Unit]] = [[] for _ in range(workers)]
    done = 0
    for unit in units:  # consecutive units to the same job, ~total/workers bytes each
        jobs[min(workers - 1, int(done / target))].append(unit)
        done += unit.end - unit.start
    jobs = [job for job in jobs if job]
    return jobs if len(jobs) > 1 else None


def _fold_unit(unit: Unit, kind: str | None, tally, skipping: bool, struct: type | None,
               first_line: int | None = None) -> Part:
    """Fold one unit. Its lines are numbered from its start (`first_line` None), and the lines
    before it (a read of everything before the unit: 0.1 s for half of a 250 MB file) are counted
    only when one of its lines is reported: skipped lines are renumbered, an error found again."""
    skip = SkipLog() if skipping else None
    relative = first_line is None and unit.start > 0
    with open(unit.path, "rb") as fh:
        try:
            lines = chain.from_iterable(_range_blocks(fh, unit.start, unit.end))
            state = tally(_records(unit.path, lines, first_line or 1, kind, skip, False, struct))
        except InputError as e:
            if relative:  # a fold is pure: the same error, at its line in the file
                return _fold_unit(unit, kind, tally, skipping, struct,
                                  1 + _count_newlines(fh, unit.start))
            return Part(None, [], e.message)
        entries = skip.entries if skip else []
        if entries and relative:
            before = _count_newlines(fh, unit.start)
            entries = [(Loc(loc.file, loc.line + before), message) for loc, message in entries]
    return Part(state, entries, None)


def _count_newlines(fh: IO[bytes], end: int, block: int = 1 << 24) -> int:
    fh.seek(0)
    count, pos = 0, 0
    while pos < end:
        data = fh.read(min(block, end - pos))
        if not data:
            break
        count += data.count(b"\n")
        pos += len(data)
    return count


def _range_blocks(fh: IO[bytes], start: int, end: int, block: int = 1 << 18) -> Iterator[list[bytes]]:
    """The lines in [start, end) (both line starts), a block's worth at a time. 256 KiB: the
    lines split from a block stay in the CPU's cache; 16 MiB blocks made reading 2.5x slower."""
    fh.seek(start)
    pos, rest = start, b""
    while pos < end:
        data = fh.read(min(block, end - pos))
        if not data:
            break
        pos += len(data)
        data = rest + data
        cut = data.rfind(b"\n") + 1 if pos < end else len(data)
        rest = data[cut:]
        lines = data[:cut].split(b"\n")
        if lines and not lines[-1]:
            lines.pop()  # the empty piece after the final newline
        yield lines
    if rest:
        yield [rest]


def fail(loc: Loc, message: str, skip: SkipLog | None) -> None:
    """Report a bad record: raise, or note it under --skip-invalid."""
    if skip is None:
        raise InputError(f"{loc}: {message}")
    skip.add(loc, message)


def dumps(record: Any) -> bytes:
    """A record (a dict, or one of records.structs) as one JSONL line."""
    if isinstance(record, msgspec.Struct):
        record = msgspec.to_builtins(record)
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def checked_line(kind: str, record: dict[str, Any] | msgspec.Struct) -> bytes:
    """`record` as a JSONL line, checked against schemas/KIND.schema.json first (the Struct fast path
    where the kind has one): a tool never writes a record its own readers would reject."""
    if isinstance(record, msgspec.Struct):
        record = msgspec.to_builtins(record)
    try:
        line = dumps(record)
    except TypeError as e:  # an integer past 64 bits, nesting past 255 levels
        problem = str(e)
    else:
        problem = None if schemas.fast_check(kind)(line) else schemas.problem(kind, record)
    if problem:
        name = record.get("episode_id") or record.get("task_id") or record.get("id") or "?"
        raise EndstateError(f"internal error: refusing to write {kind} {name}, which would not "
                            f"read back: {problem}. Please report it.", ExitCode.INTERNAL)
    return line


WRITE_CHUNK = 1 << 16  # bytes of whole lines per write when the records are all at hand


def write_jsonl(records: Iterable[Any], out: IO[bytes] | None = None, kind: str | None = None,
                *, streaming: bool = True) -> int:
    """Write complete lines only, so a killed run leaves valid JSONL: each record flushed as it
    comes (`streaming`, for records that arrive over time), or, for records all at hand (bucket's
    pool), whole lines gathered into ~64 KiB writes (a flush per line cost bucket 5% of its
    time); with `kind`, each is checked against that schema first (checked_line)."""
    out = out or stdio.records_out()
    n, pending = 0, bytearray()
    for record in records:
        pending += checked_line(kind, record) if kind else dumps(record)
        n += 1
        if streaming or len(pending) >= WRITE_CHUNK:
            out.write(pending)
            out.flush()
            pending.clear()
    if pending:
        out.write(pending)
        out.flush()
    return n
