"""Where domains and task suites live on disk: the domains every run knows (DOMAINS: the built-in
ones inside the package, and those installed packages register) and the folders a user adds
(--domains, $ENDSTATE_DOMAINS). Paths only, so a command that needs to know where the suites are
(bucket's leak guard) loads no domain."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from endstate import DOMAINS_DIR, TASKS_DIR
from endstate.core.registry import Registry, RegistryError

REQUIRED_FILES = ("schema.sql", "seed.py", "tools.py")


def _folder(entry: object) -> Path:
    """A plugin's domain: its folder, given as a path (`LIBRARY = Path(__file__).parent / "library"`)."""
    if not isinstance(entry, (str, os.PathLike)):
        raise TypeError(f"a domain entry point names the domain's folder (a str or Path), not "
                        f"{type(entry).__name__}")
    return Path(entry)


# Domains by name: the built-in ones, then those an installed package registers under the
# entry-point group endstate.domains. A domain is named after its folder.
DOMAINS: Registry[Path] = Registry("domain", accept=_folder)
for _path in sorted(DOMAINS_DIR.iterdir()):
    if (_path / "schema.sql").exists():
        DOMAINS.register(_path.name, origin=f"built-in {_path}")(_path)


def registered_dirs() -> list[Path]:
    """The folders of DOMAINS, each checked to be a domain folder named as its domain."""
    found = []
    for name, path in DOMAINS.items():
        missing = [f for f in REQUIRED_FILES if not (path / f).exists()]
        if missing:
            raise RegistryError(f"{DOMAINS.origin(name)}: {path} is not a domain folder, missing "
                                f"{', '.join(missing)}; fix the plugin, or uninstall it")
        if path.name != name:
            raise RegistryError(f"{DOMAINS.origin(name)} registers domain {name!r} at {path}: a "
                                f"domain is named after its folder; name the entry point "
                                f"{path.name!r}, or the folder {name!r}")
        found.append(path)
    return found


def domain_dirs(extra: Sequence[str]) -> list[Path]:
    """The registered domains' folders (built-in, then plugins'), then each of `extra`: a domain
    folder itself or a folder of domain folders."""
    found = registered_dirs()
    for root in map(Path, extra):
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
