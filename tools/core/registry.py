"""Extension points: a named registry that a decorator fills, as verl registers its policy losses.
Agent backends, check kinds, loss aggregations, tool listings and tool result formats are
registries; a module outside core adds one by decorating a function, and a name registered twice
is refused, naming both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import click

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str):
        self.what = what  # "agent backend": how errors name an entry
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator registering what it decorates under `name`."""
        def add(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.what} {name!r} is registered twice: "
                                 f"{_where(self._entries[name])} and {_where(entry)}")
            self._entries[name] = entry
            return entry
        return add

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"no {self.what} {name!r}; registered: {', '.join(self)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def choice(self) -> RegistryChoice:
        """A click type accepting the names registered when the flag is read (so an entry a
        plugin module registers after the CLI is built is still a valid choice)."""
        return RegistryChoice(self)


def _where(entry: object) -> str:
    return f"{getattr(entry, '__module__', '?')}.{getattr(entry, '__qualname__', repr(entry))}"


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
