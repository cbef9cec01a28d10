"""Writing a domain folder whole or not at all: the files go into a temporary folder beside the
target, which is loaded (schema, seed, tools) and only then renamed into place. A failure, an
interruption or a bug leaves the target as it was."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from endstate import DOMAINS_DIR
from endstate.core.errors import EndstateError

NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def builtin_domains() -> set[str]:
    return {p.name for p in DOMAINS_DIR.iterdir() if (p / "schema.sql").exists()}


def check_domain_name(name: str, flag: str) -> None:
    """A domain folder's name is the domain's: letters endstate can put in task ids and file
    names, and not a built-in domain's (every command would see two domains of that name)."""
    if not NAME.fullmatch(name):
        raise EndstateError(f"domain name {name!r}: use lowercase letters, digits, _ and -, "
                            "starting with a letter, at most 64 (it names the folder and prefixes "
                            f"task ids; {flag})")
    if name in builtin_domains():
        raise EndstateError(f"domain name {name!r} is a built-in domain's ({flag}): every command "
                            f"would then see two domains named {name} and refuse both; pick "
                            f"another name, e.g. my_{name}")


@contextmanager
def staged(target: Path, keep_existing: bool = False) -> Iterator[Path]:
    """A temporary folder to write `target` into, renamed to `target` when the block ends without
    an exception and removed otherwise. `keep_existing`: start from a copy of `target`'s files
    (--force keeps what the user wrote there); `target` is then replaced as a whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.writing-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would outlive the rename
    try:
        if keep_existing and target.is_dir():
            shutil.copytree(target, tmp, symlinks=True, dirs_exist_ok=True)
        yield tmp
        _replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(new: Path, target: Path) -> None:
    if not target.exists():
        os.rename(new, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / "d")
    try:
        os.rename(new, target)
    except OSError:
        os.rename(old / "d", target)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
