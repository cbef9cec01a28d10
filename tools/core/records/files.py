"""A whole file read with a bound on the bytes read, never on the size the file reports: a FIFO
would block the read forever, /dev/zero reports 0 bytes and never ends, a link may point at
either. Only regular files are read; the limit counts what was actually read."""

from __future__ import annotations

import errno
import os
import stat

_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A FIFO, a device, a socket or a folder where a file was wanted."""


class TooLarge(OSError):
    """More bytes than the reader's limit."""


def kind_of(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode)
            else "not a regular file")


def open_regular(path: str | os.PathLike, follow_links: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `path` and its stat. Opened without blocking (a FIFO
    without a writer would hold open() forever) and checked on the descriptor, so what is read is
    what was checked. `follow_links=False`: a symbolic link is refused (ELOOP)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"{kind_of(info.st_mode)}, not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_bounded(path: str | os.PathLike, limit: int, follow_links: bool = True) -> bytes:
    """The bytes of the regular file `path`, at most `limit`. Raises OSError: the system's own,
    NotRegularFile, or TooLarge once more than `limit` bytes were read (the file may grow as it
    is read: the count is what came, not what fstat said)."""
    fd, _ = open_regular(path, follow_links)
    try:
        return read_open(fd, limit, path)
    finally:
        os.close(fd)


def read_open(fd: int, limit: int, path: str | os.PathLike) -> bytes:
    """The rest of the open regular file `fd`, at most `limit` bytes (else TooLarge)."""
    chunks, total = [], 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooLarge(errno.EFBIG, f"over {limit:,} bytes", str(path))
