"""Whether two runs were prompted alike: a comparison of BASE and NEW that also changed the
few-shot turns, the tool prefill, the tool format or the interpreter measures two changes at once.

Attempts record their `prompting` (core/agent/prompting.py). It is found with a byte search rather than a
second parse: one pass over the file at memory speed, instead of decoding every record again.
"""

from __future__ import annotations

import mmap
import re

import click
import orjson

from endstate.core.agent.prompting import differences

_FLAT = re.compile(rb'"prompting"\s*:\s*(\{[^{}]*\})')  # what probe writes
_ANY = re.compile(rb'"prompting"\s*:\s*\{')


def promptings(path: str) -> list[dict]:
    """The distinct `prompting` objects the attempts of `path` record (none for stdin). Flat
    objects are found by the byte search; a file with nested ones is parsed line by line."""
    if path == "-":
        return []
    with open(path, "rb") as fh:
        try:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return []
        with data:
            flat = [m.group(1) for m in _FLAT.finditer(data)]
            if sum(1 for _ in _ANY.finditer(data)) == len(flat):
                return [orjson.loads(raw) for raw in set(flat)]
            lines = [line for line in data[:].splitlines() if b'"prompting"' in line]
    seen = {orjson.dumps(p, option=orjson.OPT_SORT_KEYS): p for p in (_prompting_of(x) for x in lines) if p}
    return list(seen.values())


def _prompting_of(line: bytes) -> dict | None:
    try:
        value = orjson.loads(line).get("prompting")
    except (orjson.JSONDecodeError, AttributeError):
        return None  # the reader reports bad lines
    return value if isinstance(value, dict) else None


def warn_mixed_prompting(base: str, new: str) -> None:
    """Say on stderr when BASE and NEW (or the attempts within one) were prompted differently."""
    mixed = differences([*promptings(base), *promptings(new)])
    if mixed:
        click.echo("warning: BASE and NEW were not prompted alike (" + "; ".join(
            f"{k}: {' vs '.join(sorted(v))}" for k, v in mixed.items()) + "): the comparison "
            "measures the prompt change too. Probe both without prompting flags, or with the same.",
            err=True)
