"""Lines already judged valid, remembered across processes: a task file is read again and again
(every `grade` reads the 811 built-in tasks, every rollout, probe and grpo its own), and jsonschema
takes ~1 ms a task. A line found valid is remembered by a digest of its bytes under a digest of
the schemas and of the jsonschema install, in cache_dir()/verdicts; reading the same bytes again
skips jsonschema. An edited line, schema or jsonschema is judged again; only "valid" is kept, so
a bad line is always reported by jsonschema with its message.
"""

from __future__ import annotations

import atexit
import hashlib
import os
from functools import cache
from importlib.util import find_spec

from endstate import SCHEMA_DIR, cache_dir

KINDS = ("task",)  # read again and again, and slow to judge (the others have a Struct fast path)
_SIZE = 16  # bytes of a line's digest
_MAX_LINES = 1 << 20  # a file past this (16 MiB) starts over


def _jsonschema_install() -> bytes:
    """Which jsonschema judges: its location and when it was installed (importlib.metadata's
    version costs ~40 ms a process, and importing jsonschema ~65 ms, which a known line skips)."""
    origin = find_spec("jsonschema").origin
    stat = os.stat(origin)
    return f"{origin}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw.strip(), digest_size=_SIZE).digest()


class Verdicts:
    """The lines of one kind known valid: `known(raw)`, and `add(raw)` after jsonschema said so;
    what was added is merged into the file when the process exits."""

    def __init__(self, kind: str):
        h = hashlib.sha256(_jsonschema_install())
        for path in sorted(SCHEMA_DIR.glob("*.schema.json")):  # a kind's schema may $ref another
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        self.path = cache_dir() / "verdicts" / f"{kind}-{h.hexdigest()[:20]}.bin"
        self.valid = self._read()
        self.added: set[bytes] = set()

    def _read(self) -> set[bytes]:
        try:
            data = self.path.read_bytes()
        except OSError:  # none yet, or unreadable: everything is judged
            return set()
        return {data[i:i + _SIZE] for i in range(0, len(data) - len(data) % _SIZE, _SIZE)}

    def known(self, raw: bytes) -> bool:
        return _digest(raw) in self.valid

    def add(self, raw: bytes) -> None:
        d = _digest(raw)
        if d not in self.valid:
            self.valid.add(d)
            self.added.add(d)

    def save(self) -> None:
        """Merge what this process added into the file (atomically: readers see the old or the new
        file; two writers may each lose the other's additions, which are judged again later)."""
        if not self.added:
            return
        merged = self._read() | self.added
        if len(merged) > _MAX_LINES:
            merged = self.added
        import tempfile  # here: ~5 ms of every tool's start otherwise

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name)
            with os.fdopen(fd, "wb") as f:
                f.write(b"".join(sorted(merged)))
            os.replace(tmp, self.path)
        except OSError:  # a read-only or full cache: the next run judges these lines again
            pass
        self.added = set()


@cache
def of(kind: str) -> Verdicts:
    verdicts = Verdicts(kind)
    atexit.register(verdicts.save)
    return verdicts
