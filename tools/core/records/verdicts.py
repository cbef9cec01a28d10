"""Lines already judged valid, remembered across processes: a task file is read again and again
(every `grade` reads the 811 built-in tasks, every rollout, probe and grpo its own), and jsonschema
takes ~1 ms a task. A line found valid is remembered by a digest of its bytes under a digest of
the schemas and of the jsonschema install, in cache_dir()/verdicts; reading the same bytes again
skips jsonschema. An edited line, schema or jsonschema is judged again; only "valid" is kept, so
a bad line is always reported by jsonschema with its message.

A remembered verdict skips validation, so the file is believed only when nobody else could have
written it (on shared cluster storage anyone who can write the folder could): a regular file
(never a link, a FIFO or a device), owned by this user and writable by nobody else, at most
_MAX_BYTES long, whose checksum (keyed by the schemas' digest) matches. Anything else is ignored
(every line judged) and replaced at exit; a cache that cannot be written is a warning.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sys
from functools import cache
from importlib.util import find_spec

from endstate import SCHEMA_DIR, cache_dir
from endstate.core.records.files import open_regular, read_open

KINDS = ("task",)  # read again and again, and slow to judge (the others have a Struct fast path)
_SIZE = 16  # bytes of a line's digest, and of the file's checksum
_MAX_LINES = 1 << 20  # a file past this (16 MiB) starts over
MAGIC = b"endstate verdicts 2\n"
_MAX_BYTES = len(MAGIC) + _SIZE * (_MAX_LINES + 1)


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
        self.key = h.digest()  # the checksum's key: a file is only good for the schemas it was made for
        self.path = cache_dir() / "verdicts" / f"{kind}-{h.hexdigest()[:20]}.bin"
        self.distrusted = False  # the file on disk was not believed: replace it at exit
        self.valid = self._read()
        self.added: set[bytes] = set()

    def _checksum(self, body: bytes) -> bytes:
        return hashlib.blake2b(body, digest_size=_SIZE, key=self.key).digest()

    def _read(self) -> set[bytes]:
        """The digests in the file, or none when there is no file or it is not to be believed."""
        try:
            fd, info = open_regular(self.path, follow_links=False)
        except FileNotFoundError:
            return set()
        except OSError as e:  # a link, a FIFO, a device, a folder, unreadable
            return self._distrust(e.strerror or str(e))
        try:
            why = foreign(info)
            data = b"" if why else read_open(fd, _MAX_BYTES, self.path)
        except OSError as e:  # past the bound, or unreadable
            why = e.strerror or str(e)
        finally:
            os.close(fd)
        if why:
            return self._distrust(why)
        body = data[len(MAGIC) + _SIZE:]
        if not data.startswith(MAGIC) or len(body) % _SIZE or \
                data[len(MAGIC):len(MAGIC) + _SIZE] != self._checksum(body):
            self.distrusted = True  # torn, an older format, or edited: judged again, rewritten
            return set()
        return {body[i:i + _SIZE] for i in range(0, len(body), _SIZE)}

    def _distrust(self, why: str) -> set[bytes]:
        self.distrusted = True
        _warn(f"ignored the task verdict cache {self.path} ({why}); every task line is "
              "validated, and the file is replaced")
        return set()

    def known(self, raw: bytes) -> bool:
        return _digest(raw) in self.valid

    def add(self, raw: bytes) -> None:
        d = _digest(raw)
        if d not in self.valid:
            self.valid.add(d)
            self.added.add(d)

    def save(self) -> None:
        """Merge what this process added into the file (atomically: readers see the old or the new
        file; two writers may each lose the other's additions, which are judged again later).
        A file that was not believed is replaced."""
        if not self.added and not self.distrusted:
            return
        on_disk = set() if self.distrusted else self._read()
        merged = on_disk | self.added
        if len(merged) > _MAX_LINES:
            merged = self.added
        body = b"".join(sorted(merged))
        import tempfile  # here: ~5 ms of every tool's start otherwise

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name)  # mode 0600
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + self._checksum(body) + body)
            os.replace(tmp, self.path)
        except OSError as e:  # a read-only or full cache: the next run judges these lines again
            _warn(f"cannot keep task verdicts in {self.path.parent} ({e.strerror or e}): every run "
                  "validates its task lines again (~1 ms a line); set ENDSTATE_CACHE to a folder "
                  "you can write")
        self.added, self.distrusted = set(), False


def foreign(info: os.stat_result) -> str | None:
    """Why a file someone else could have written is not to be believed (None: only this user)."""
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by this user"
    if info.st_mode & 0o022:
        return f"writable by others: mode {info.st_mode & 0o777:o}"
    return None


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


@cache
def of(kind: str) -> Verdicts:
    verdicts = Verdicts(kind)
    atexit.register(verdicts.save)
    return verdicts
