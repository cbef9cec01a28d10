"""Extension points: a named registry that a decorator fills, as verl registers its policy losses,
and that installed packages fill through a Python entry-point group, as llm's plugins do.

A module adds an entry with `@REGISTRY.register("name")`. An installed package adds one by
declaring it under the registry's group (`endstate.` and the plural of what it holds, with
underscores: `endstate.check_kinds`, `endstate.agent_backends`, `endstate.policy_losses`), the
entry point's name being the entry's name and its object the entry:

    [project.entry-points."endstate.check_kinds"]
    even_total = "my_plugin.checks:even_total"

Plugins are read once, the first time a registry is asked for a name or its list, never at import.
A name registered twice is refused, naming both; a plugin that fails to load is refused naming the
plugin and how to fix it (docs/api.md)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from endstate.core.errors import ConfigurationError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

T = TypeVar("T")

GROUP_PREFIX = "endstate."


class RegistryError(ConfigurationError, ValueError):
    """A name registered twice, or a plugin that cannot be loaded: a setup the user fixes, so the
    command stops whichever record it was on."""


@functools.lru_cache(maxsize=4)
def installed_entry_points(path: tuple[str, ...]) -> EntryPoints:
    """Every entry point of the distributions on `path` (sys.path): one scan for all registries
    (a scan per group cost a command ~5 ms each), again only if the path changes."""
    from importlib.metadata import entry_points  # ~30 ms: only once a registry is asked

    return entry_points()


def entry_point_group(what: str) -> str:
    """The entry-point group of a registry of `what`: "check kind" -> "endstate.check_kinds",
    "policy loss" -> "endstate.policy_losses", "KL penalty" -> "endstate.kl_penalties"."""
    *head, last = what.lower().split()
    if last.endswith(("s", "x", "sh", "ch")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return GROUP_PREFIX + "_".join([*head, last])


def instance_of(cls: type[T]) -> Callable[[Any], T]:
    """A registry's `accept` when a plugin's entry must be a `cls` (one of endstate.api's)."""
    def accept(entry: Any) -> T:
        if not isinstance(entry, cls):
            raise TypeError(f"the entry point's object is a {type(entry).__name__}, not an "
                            f"endstate.api.{cls.__name__}")
        return entry
    return accept


class Registry(Generic[T]):
    def __init__(self, what: str, accept: Callable[[Any], T] | None = None):
        self.what = what  # "agent backend": how errors name an entry
        self.group = entry_point_group(what)
        # what a plugin's object must be: returns the entry, or raises TypeError saying what it
        # should have been
        self._accept = accept
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._plugins: RegistryError | bool = False  # read yet (or how reading them failed)

    def register(self, name: str, origin: str | None = None) -> Callable[[T], T]:
        """A decorator registering what it decorates under `name` (`origin`: how an error names
        where it came from; default its module and name)."""
        def add(entry: T) -> T:
            where = origin or _where(entry)
            if name in self._entries:
                raise RegistryError(f"{self.what} {name!r} is registered twice: "
                                    f"{self._origins[name]} and {where}; rename one")
            self._entries[name] = entry
            self._origins[name] = where
            return entry
        return add

    def unregister(self, name: str) -> None:
        """Take `name` out (a test's temporary entry, say); a name not registered is left alone."""
        self._entries.pop(name, None)
        self._origins.pop(name, None)

    def origin(self, name: str) -> str:
        """Where the entry `name` came from: a module's function, or a plugin and its entry point."""
        self._load_plugins()
        return self._origins[name]

    def _load_plugins(self) -> None:
        """Register each entry point of the group, once per process."""
        if isinstance(self._plugins, RegistryError):
            raise self._plugins
        if self._plugins:
            return
        self._plugins = True
        for ep in installed_entry_points(tuple(sys.path)).select(group=self.group):
            dist = ep.dist.name if ep.dist is not None else "?"
            origin = f"plugin {dist} ({self.group}: {ep.name} = {ep.value})"
            try:
                entry = ep.load()
                if self._accept is not None:
                    entry = self._accept(entry)
                self.register(ep.name, origin)(entry)
            except RegistryError as e:
                self._plugins = e
                raise
            except Exception as e:
                self._plugins = RegistryError(
                    f"{origin} cannot be loaded: {type(e).__name__}: {e}; fix the plugin, or "
                    f"uninstall it (pip uninstall {dist})")
                raise self._plugins from e

    def __getitem__(self, name: str) -> T:
        self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"no {self.what} {name!r}; registered: {', '.join(self)}") from None

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load_plugins()
        return iter(list(self._entries))

    def items(self) -> list[tuple[str, T]]:
        self._load_plugins()
        return list(self._entries.items())

    def choice(self) -> RegistryChoice:
        """A click type accepting the names registered when the flag is read (so an entry a
        plugin module registers after the CLI is built is still a valid choice)."""
        return RegistryChoice(self)


def _where(entry: object) -> str:
    """A function or class as module.name; anything else by its type, where it is defined."""
    name = getattr(entry, "__qualname__", None)
    if name:
        return f"{getattr(entry, '__module__', '?')}.{name}"
    return f"a {type(entry).__name__} of {type(entry).__module__}"


class RegistryChoice(click.Choice):
    def __init__(self, registry: Registry):
        self.registry = registry
        super().__init__(())

    @property  # click reads the names at conversion and in --help: the registry's, as they are then
    def choices(self):
        return tuple(self.registry)

    @choices.setter
    def choices(self, value) -> None:
        pass
