"""Progress of long work on stderr: a live bar while stderr is a terminal, and one summary line at
the end whether or not it is (a Slurm log gets the line, not the bar). `quiet` silences both."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any


class Progress:
    """`done/total` with named counts (e.g. reward 1, system_error), elapsed, ETA and, when told
    about tokens, tokens/s. Counts show in the order of `counts`, then as first given."""

    def __init__(self, total: int, what: str, unit: str = "episode", quiet: bool = False,
                 counts: tuple[str, ...] = (), summary: bool = True):
        self.what, self.unit, self.quiet, self.with_summary = what, unit, quiet, summary
        self.total, self.done, self.tokens = total, 0, 0
        self.counts: Counter[str] = Counter(dict.fromkeys(counts, 0))  # shown even while 0
        self.started = time.monotonic()
        self.text = ""
        self.bar = None
        if total and not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, desc=what, file=sys.stderr, dynamic_ncols=True,
                            leave=summary)  # a bar inside a longer job (one grpo step) goes away

    def status(self, text: str) -> None:
        """A few words on the live bar beside the counts (the latest step of a grpo run)."""
        self.text = text

    def advance(self, counts: Mapping[str, int] = {}, tokens: int = 0) -> None:
        self.done += 1
        self.tokens += tokens
        self.counts.update(counts)
        if self.bar:
            self.bar.set_postfix_str(self._counts(), refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar:
            self.bar.close()
            self.bar = None
        if self.with_summary and not self.quiet:
            note(self.summary())

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        line = f"{self.what}: {self.done} {self.unit}(s) in {_duration(elapsed)}"
        if self.counts:
            line += ": " + self._counts()
        if self.tokens:
            line += f"; {self.tokens:,} tokens generated ({self.tokens / max(elapsed, 1e-9):,.1f}/s)"
        return line

    def _counts(self) -> str:
        parts = [f"{name} ×{n}" for name, n in self.counts.items()]
        if self.bar and self.text:
            parts.append(self.text)
        if self.bar and self.tokens:
            parts.append(f"{self.tokens / max(time.monotonic() - self.started, 1e-9):,.0f} tok/s")
        return ", ".join(parts)


def note(message: str) -> None:
    """A log line on stderr that does not break a live bar."""
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def episode_counts(record: Mapping[str, Any]) -> dict[str, int]:
    """What an episode (or a graded episode, or an attempt) adds to a progress line."""
    if record["status"] == "system_error":
        return {"system_error": 1}
    if "reward" in record:
        return {f"reward {record['reward']}": 1}
    return {"ok": 1}


def episode_tokens(record: Mapping[str, Any]) -> int:
    """Completion tokens the agent generated in an episode."""
    return ((record.get("usage") or {}).get("agent") or {}).get("completion_tokens") or 0


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"
