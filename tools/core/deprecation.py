"""Old import paths, kept one release with a DeprecationWarning that names the new import
(docs/api.md, Deprecations). A module that moved leaves a shim at its old path that calls
`moved`; a module that became a package answers its old names through `moved_names`."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

SAID = "is deprecated and goes in the next release"
# What core.env.domain shows while a domain's module loads (Python hides a DeprecationWarning
# outside __main__); elsewhere it shows as Python shows them (a program's __main__, pytest).
OLD_PATH = rf".* {SAID}: "


def warning(old: str, instead: str) -> str:
    return f"{old} {SAID}: {instead}"


def moved(old: str, instead: str) -> None:
    """Warn that the module `old`, whose body calls this, moved: the warning points at the line
    that imported it (the import machinery's frames are skipped)."""
    warnings.warn(warning(old, instead), DeprecationWarning, stacklevel=3)


def moved_names(package: str, names: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module `__getattr__` for the names that `package` held when it was a module: name ->
    (the module holding it now, what to import instead). Other names are no attribute, so that
    `from package import submodule` still imports the submodule."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, instead = names[name]
        warnings.warn(warning(f"{package}.{name}", instead), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)

    return __getattr__
