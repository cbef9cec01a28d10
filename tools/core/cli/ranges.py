"""The ranges of command-line numbers and the checks of endpoint URLs: light (click only), so
that every tool can use them without loading the agent.

Every number a flag or a grpo key takes has a declared range, both ends (tests/test_flag_ranges.py
holds every option of every command to it): nan, inf, a 70-bit integer or 1e308 is a usage error
naming the flag, never an overflow deep inside a run. The ends are far past any sensible value."""

from __future__ import annotations

import math
import re

import click

from endstate.core.wire.keys import key_env_problem
from endstate.core.wire.urls import url_problem


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange without nan and inf: nan passes every range check, and orjson writes
    both as null, so `--temperature nan` would send the server's default and record null."""

    def convert(self, value, param, ctx):
        # finite first: `inf` is then named for what it is, not as a value past the upper end
        number = click.types.FloatParamType.convert(self, value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


INT64_MAX = 2**63 - 1
MAX_REPEATS = 10_000  # attempts per task: 20 is the reference evaluation
MAX_PROCS = 1024
MAX_SECONDS = 7 * 24 * 3600.0  # a timeout: a week
MAX_PRICE = 1e6  # USD per million tokens


def count(low: int = 0, high: int = INT64_MAX) -> click.IntRange:
    """An integer flag's range (both ends declared)."""
    return click.IntRange(low, high)


def number(low: float, high: float, **open_ends: bool) -> FiniteFloatRange:
    """A real flag's range (both ends declared, finite)."""
    return FiniteFloatRange(low, high, **open_ends)


class EndpointURL(click.ParamType):
    """An endpoint's base URL, or several separated by commas or spaces, each
    http(s)://HOST[:PORT][/path]; anything else is a usage error naming the flag (or the YAML key),
    before the first episode, not a failure inside every one."""

    name = "url"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):  # a YAML value
            self.fail(f"{value!r:.60} is not a URL", param, ctx)
        for one in split_urls(value):
            problem = url_problem(one)
            if problem:
                self.fail(f"{one!r}: {problem}; give the endpoint's base URL, e.g. "
                          "http://localhost:8000/v1", param, ctx)
        return value


URL = EndpointURL()


class KeyEnv(click.ParamType):
    """The name of the environment variable holding a role's API key (core.wire.keys): a flag
    names the variable, never the secret. A value that is no name is refused without being
    echoed (it may be the key itself, given by mistake)."""

    name = "VAR"

    def convert(self, value, param, ctx):
        problem = key_env_problem(value) if isinstance(value, str) else "takes a variable name"
        if problem:
            self.fail(problem, param, ctx)
        return value


KEY_ENV = KeyEnv()


def split_urls(value: str) -> list[str]:
    return [u for u in re.split(r"[,\s]+", value) if u]


def urls(ctx, param, values) -> list[str]:
    """A repeatable endpoint flag (--agent-url, --user-url): every URL its values hold, checked."""
    return [u for v in values for u in split_urls(URL.convert(v, param, ctx))]


def url(ctx, param, value: str | None) -> str | None:
    """One endpoint flag (--judge-base-url): http(s)://HOST[:PORT][/path], else a usage error."""
    return value if value is None else URL.convert(value, param, ctx)


SEED = count(0, INT64_MAX)  # the seed of everything random: 64 bits, as every sampler takes
REPEATS = count(1, MAX_REPEATS)
PROCS = count(1, MAX_PROCS)
SECONDS = number(0, MAX_SECONDS, min_open=True)
RETRIES = count(1, 100)


def png(ctx, param, value: str | None) -> str | None:
    """--plot FILE.png: the suffix decides matplotlib's format, and it draws PNGs."""
    if value is not None and not value.lower().endswith(".png"):
        raise click.BadParameter(f"{value!r}: give a file name ending in .png", ctx, param)
    return value


def field_names(ctx, param, value):
    """--by FIELD, --cluster FIELD: names of record fields, as JSON writes them (no control
    character, quote or backslash; not empty)."""
    for name in (value if isinstance(value, tuple) else () if value is None else (value,)):
        if not name or re.search(r'[\x00-\x1f"\\]', name):
            raise click.BadParameter(f"{name!r}: a field name, e.g. domain", ctx, param)
    return value


MAX_SHARDS = 100_000


def shard(ctx, param, value: str | None) -> str | None:
    """--shard I/N with 0 <= I < N <= MAX_SHARDS, checked when the flag is read."""
    if value is not None:
        try:
            i, n = (int(x) for x in value.split("/"))
            assert 0 <= i < n <= MAX_SHARDS
        except (ValueError, AssertionError):
            raise click.BadParameter(f"{value!r}: use I/N with 0 <= I < N <= {MAX_SHARDS}, e.g. "
                                     "3/16", ctx, param) from None
    return value
