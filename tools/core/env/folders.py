"""Where domains and task suites live on disk: the built-in ones inside the package and the
folders a user adds (--domains, $ENDSTATE_DOMAINS). Paths only, so a command that needs to know
where the suites are (bucket's leak guard) loads no domain."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from endstate import DOMAINS_DIR, TASKS_DIR

REQUIRED_FILES = ("schema.sql", "seed.py", "tools.py")


def domain_dirs(extra: Sequence[str]) -> list[Path]:
    """The built-in domain folders, then each of `extra`: a domain folder itself or a folder of
    domain folders."""
    found = []
    for root in [DOMAINS_DIR, *map(Path, extra)]:
        if all((root / f).exists() for f in REQUIRED_FILES):
            found.append(root)
        elif root.is_dir():
            found.extend(sorted(p for p in root.iterdir()
                                if p.is_dir() and (p / "schema.sql").exists()))
    return found


def suite_files(extra: Sequence[str]) -> list[str]:
    """The task suites a run knows without being given a task file: the built-in ones, then the
    tasks/*.jsonl of each domain folder (`extra` as in domain_dirs)."""
    files = sorted(TASKS_DIR.rglob("*.jsonl"))
    for folder in domain_dirs(extra):
        files += sorted((folder / "tasks").glob("*.jsonl"))
    return list(dict.fromkeys(str(f) for f in files))
