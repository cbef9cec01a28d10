"""What a run has to show for itself: its updates, its error steps, and when a checkpoint is
worth writing. A run that cannot make progress stops instead of training on nothing.

- An error step is a step whose every episode was a system error (an endpoint down, a judge
  that cannot answer): nothing to learn from, no update. After `max_error_steps` of them in a row
  the run stops, exit NO_PROGRESS, naming the errors (TRL and verl would keep stepping).
- A checkpoint is written only when an update was made since the last one: a run that never
  updated leaves no `latest` checkpoint of the untrained model, and a checkpoint never repeats
  the weights of the one before (a resume redoes the steps since, which are seeded).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from endstate.core.errors import EndstateError, ExitCode


def is_error_step(episodes: list[dict[str, Any]]) -> bool:
    """Whether a step generated episodes and every one was a system error."""
    return bool(episodes) and all(e.get("status") == "system_error" for e in episodes)


def error_causes(episodes: list[dict[str, Any]], shown: int = 2) -> str:
    """The most common system errors of some episodes: `kind ×n: message`."""
    counts = Counter(((e.get("error") or {}).get("kind", "?"), (e.get("error") or {}).get("message", ""))
                     for e in episodes if e.get("status") == "system_error")
    return "; ".join(f"{kind} ×{n}: {message[:300]}" for (kind, message), n in counts.most_common(shown))


@dataclass
class Outcome:
    """The run's updates and error steps; `state_dict` travels in the checkpoint."""

    max_error_steps: int
    updates: int = 0  # optimizer steps made, over the whole run (resumes included)
    saved_updates: int = 0  # `updates` when the last checkpoint was written
    error_run: list[int] = field(default_factory=list)  # the error steps in a row, up to now
    updated_here: int = 0  # this process's updates (a resumed run made the others before)
    skipped: int = 0  # this process's steps without an update for want of an informative group
    error_steps: int = 0  # this process's error steps

    def after_step(self, step: int, updated: bool, episodes: list[dict[str, Any]]) -> None:
        """Count step `step`; raise (exit NO_PROGRESS) at `max_error_steps` error steps in a row."""
        if updated:
            self.updates += 1
            self.updated_here += 1
        error = is_error_step(episodes)
        self.error_steps += error
        self.skipped += not updated and not error
        self.error_run = [*self.error_run, step] if error else []
        if len(self.error_run) >= self.max_error_steps:
            first, last = self.error_run[0], self.error_run[-1]
            raise EndstateError(
                f"grpo: {len(self.error_run)} error step(s) in a row (step {first}"
                f"{f' to {last}' if last != first else ''}): every episode was a system error, so "
                f"nothing was trained ({error_causes(episodes)}). {self.updates} update(s) so far"
                + ("; fix what failed, then --resume from the last checkpoint" if self.updates else
                   ", no checkpoint; fix what failed, then run again with another --out (nothing "
                   "to resume)") + " (--max-error-steps sets how many such steps stop the run)",
                ExitCode.NO_PROGRESS)

    def checkpoint_due(self) -> bool:
        """Whether a checkpoint would hold weights no checkpoint holds yet."""
        return self.updates > self.saved_updates

    def saved(self) -> None:
        self.saved_updates = self.updates

    def summary(self, steps: int) -> str:
        """This process's steps and updates (and the run's, after a resume)."""
        run = f" ({self.updates} in the run)" if self.updates != self.updated_here else ""
        parts = [f"{steps} step(s), {self.updated_here} update(s){run}"]
        if self.skipped:
            parts.append(f"{self.skipped} without an informative group")
        if self.error_steps:
            parts.append(f"{self.error_steps} error step(s)")
        return ", ".join(parts)

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "error_run": list(self.error_run)}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """A checkpoint's counts (one written before they were kept: from its step on)."""
        state = state or {}
        self.updates = self.saved_updates = int(state.get("updates", 0))
        self.error_run = list(state.get("error_run", []))
