"""serve-mcp's --out: episodes appended crash-safely, one whole line per write.

Each record is checked against the episode schema, written with one append (O_APPEND) under a
lock, and flushed to disk (fsync) before it counts as written, so a killed server leaves at most a
cut last line, which the next `--resume` removes (core.tasks.done_keys) and whose key runs again.
The gateway holds an exclusive lock on the file while it serves: two gateways appending to one
file would hand out the same keys. Stdio servers (one session each, possibly many at once) lock
only around each append.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

from endstate.core.episode.plan import done_keys
from endstate.core.errors import EndstateError, FileError
from endstate.core.records.jsonl import checked_line


class EpisodeLog:
    def __init__(self, path: str, *, exclusive: bool = False):
        self.path, self.exclusive = path, exclusive
        try:
            if Path(path).exists() and not Path(path).is_file():
                # a device or a pipe: appends are never read back for --resume, and counting the
                # lines of /dev/zero or a FIFO never ends
                raise FileError(f"{path}: --out takes a regular file (episodes are appended "
                                "there, and read back by --resume)")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.file = open(path, "ab")  # noqa: SIM115 - held for the log's life
        except OSError as e:
            raise FileError(f"{path}: cannot append episodes here: {e.strerror or e}") from None
        self._lock = threading.Lock()  # appends come from worker threads (gateway.py)
        if exclusive:
            try:
                fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.file.close()
                raise EndstateError(f"{path}: another serve-mcp gateway is writing this file; "
                                    "stop it, or give this one another --out") from None

    def written_keys(self) -> set[tuple[str, int]]:
        """(task_id, attempt) keys with a clean episode in the file; a cut last line is removed."""
        return done_keys(self.path, self.file, "episode")

    def records(self) -> int:
        """How many lines the file holds (what a gateway without --resume refuses to add to)."""
        with open(self.path, "rb") as fh:
            return sum(1 for line in fh if line.strip())

    def append(self, episode: dict[str, Any]) -> None:
        line = checked_line("episode", episode)
        with self._lock:
            if not self.exclusive:
                fcntl.flock(self.file.fileno(), fcntl.LOCK_EX)
            try:
                view = memoryview(line)
                while view:  # one write for any sane line; a short write goes on where it stopped
                    view = view[os.write(self.file.fileno(), view):]
                os.fsync(self.file.fileno())
            finally:
                if not self.exclusive:
                    fcntl.flock(self.file.fileno(), fcntl.LOCK_UN)

    def close(self) -> None:
        self.file.close()
