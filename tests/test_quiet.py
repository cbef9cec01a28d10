"""-q/--quiet means quiet: errors and warnings only on stderr, no progress, no step or round
lines, no summary. Each command is run as a user runs it, once as is (it speaks) and once with
-q (it says nothing), and its stdout is the same both times."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

from __future__ import annotations

import subprocess

import orjson
import pytest
from conftest import BIN, ROOT
from grpo_fixtures import buttons, launcher_env, tiny_model  # noqa: F401 - pytest fixtures

EXAMPLES = ROOT / "schemas" / "examples"
RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"


def run(args: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd,
                          env=launcher_env(), timeout=600, check=False)


def grpo_train(tiny_model, buttons, out) -> list[str]:
    return ["grpo", "train", "--pool", buttons["pool"], "--model", str(tiny_model), "--domains",
            buttons["domain"], "--deepspeed", "zero0", "--out", str(out), "--steps", "1",
            "--batch-tasks", "2", "--group-size", "2", "--max-new-tokens", "3", "--max-context",
            "512", "--no-few-shot", "--report-to", "none"]


COMMANDS = {  # a command, and what it says on stderr when not quiet ({tmp}: its own folder)
    "grade score": (["grade", "{tmp}/episode.jsonl"], "graded 1: "),
    "grade state": (["grade", "state", "{tmp}/episode.jsonl", "-o", "{tmp}/s.db"], "wrote "),
    "grade new-domain": (["grade", "new-domain", "shop", "--out", "{tmp}/d"], "shop"),
    "rollout parity": (["rollout", "parity", "{tmp}/episode.jsonl"], "parity: "),
    "bucket --holdout": (["bucket", "--tasks", str(RETAIL), "--allow-bench", "--holdout", "0.5",
                          "--holdout-file", "{tmp}/held.jsonl", "{tmp}/attempts.jsonl"], "held out to"),
}


def inputs(folder) -> None:
    """The example episode as a JSONL line, and 10 attempts of each of 4 bench tasks with 5
    successes (the medium band: kept, so there is a pool to hold out from)."""
    (folder / "episode.jsonl").write_bytes(orjson.dumps(orjson.loads((EXAMPLES / "episode.json").read_bytes())) + b"\n")
    attempt = orjson.loads((EXAMPLES / "attempt.json").read_bytes())
    ids = [orjson.loads(line)["id"] for line in RETAIL.read_bytes().splitlines()[:4]]
    (folder / "attempts.jsonl").write_bytes(b"".join(
        orjson.dumps({**attempt, "task_id": i, "attempt": n, "reward": int(n < 5), "status": "ok",
                      "episode_id": f"{i}/{n}"}) + b"\n" for i in ids for n in range(10)))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_quiet_commands_say_nothing_and_give_the_same_records(tmp_path, name):
    args, says = COMMANDS[name]
    outcomes = []
    for quiet, folder in ((False, tmp_path / "loud"), (True, tmp_path / "quiet")):
        folder.mkdir()
        inputs(folder)
        done = run([a.replace("{tmp}", str(folder)) for a in args] + (["-q"] if quiet else []), folder)
        assert done.returncode == 0, (name, done.stderr)
        outcomes.append(done)
    loud, quiet = outcomes
    assert says in loud.stderr, loud.stderr
    assert quiet.stderr == "", quiet.stderr
    assert quiet.stdout == loud.stdout


def test_grpo_quiet_prints_no_round_step_or_summary_line(tmp_path, tiny_model, buttons):
    """Before: `grpo train --quiet` printed every round and step line (docs/grpo.md: "keeps only
    errors"); and `grpo export --quiet` did not exist."""
    loud = run(grpo_train(tiny_model, buttons, tmp_path / "loud"), tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "grpo: step 1 round 0: " in loud.stderr and "grpo: 1 step(s), 1 update(s)" in loud.stderr
    quiet = run([*grpo_train(tiny_model, buttons, tmp_path / "quiet"), "-q"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == "", quiet.stderr
    exported = run(["grpo", "export", str(tmp_path / "quiet"), str(tmp_path / "hf"), "-q"], tmp_path)
    assert exported.returncode == 0 and exported.stderr == "", exported.stderr
    assert (tmp_path / "hf" / "config.json").exists()
