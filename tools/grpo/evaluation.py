"""The held-out evaluation during a run (--eval-tasks): the current policy probed on tasks it never
trains on, at step 0, every --eval-every steps and at the last step, through the same runtime,
sampler and grader as training (grpo.rollouts), K attempts a task.

Each evaluation writes OUT/eval/step-N.jsonl (attempt records: `evalstats` reads them as it reads
probe's) and one line of OUT/eval/metrics.jsonl. Its pass@1 and interval are evalstats' own,
computed by running `python -m endstate.evalstats` on that file, so a dashboard and a later
`evalstats` agree to the digit. An evaluation already written is not run again on --resume.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from endstate.core.episode.leak import overlapping
from endstate.core.episode.plan import load_tasks, refuse
from endstate.core.errors import EndstateError
from endstate.core.records.episode import attempt_record
from endstate.core.records.jsonl import checked_line, dumps


@dataclass
class Evaluation:
    tasks: list[dict[str, Any]]
    repeats: int
    every: int
    folder: Path

    @classmethod
    def of(cls, cfg, out: Path, pool: list[dict[str, Any]]) -> Evaluation | None:
        """The evaluation --eval-tasks asks for, refused (exit 2) when a task is also in the pool,
        by id or by content (core.episode.leak's fingerprint), or cannot run here."""
        if not cfg.eval_tasks:
            return None
        tasks = load_tasks([cfg.eval_tasks], None)
        if not tasks:
            raise EndstateError(f"--eval-tasks {cfg.eval_tasks}: no tasks in the file")
        both = sorted(overlapping(pool, tasks))
        refuse(both, f"of the pool are also held out in --eval-tasks {cfg.eval_tasks} (same id or "
               "same content)", "a policy must not train on the tasks that evaluate it: take them "
               "out of the pool (bucket --exclude EVAL_TASKS)")
        return cls(tasks, cfg.eval_repeats, cfg.eval_every, out / "eval")

    def due(self, step: int, last: int) -> bool:
        """At step 0, every `every` steps, and at the last step."""
        return step in (0, last) or (self.every > 0 and step % self.every == 0)

    def done(self, step: int) -> dict[str, Any] | None:
        """The summary of the evaluation at `step`, if it was written (a resumed run)."""
        for line in self._summaries():
            if line["step"] == step:
                return line
        return None

    def _summaries(self) -> list[dict[str, Any]]:
        path = self.folder / "metrics.jsonl"
        return [orjson.loads(b) for b in path.read_bytes().splitlines() if b.strip()] if path.exists() else []

    def write(self, step: int, episodes: list[dict[str, Any]]) -> dict[str, Any]:
        """Write the step's attempts and summarise them with evalstats: its pass@1, interval and
        counts, one line of eval/metrics.jsonl."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"step-{step:06d}.jsonl"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"".join(checked_line("attempt", {**attempt_record(e), "step": step})
                                 for e in episodes))
        tmp.replace(path)  # whole or absent: a killed run evaluates this step again
        report = evalstats(path)["overall"]
        summary = {"step": step, "tasks": report["tasks"], "attempts": report["attempts"],
                   "system_errors": report["system_errors"], "pass_at_1": report["pass_at_1"],
                   "pass_at_1_ci95": report["pass_at_1_ci95"], "file": path.name}
        with open(self.folder / "metrics.jsonl", "ab") as fh:
            fh.write(dumps(summary))
        return summary


def evalstats(path: Path) -> dict[str, Any]:
    """`evalstats FILE` as JSON: the same numbers a user gets from the command."""
    done = subprocess.run([sys.executable, "-m", "endstate.evalstats", str(path)],
                          capture_output=True, check=False)
    if done.returncode:
        raise EndstateError(f"evalstats {path} failed ({done.returncode}): "
                            f"{done.stderr.decode(errors='replace').strip()[-500:]}")
    return orjson.loads(done.stdout)
