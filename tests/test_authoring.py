"""docs/authoring.md and its example (docs/example): the example's tasks are sound, validate
catches a weakened trap, the trap catches the forbidden write, and the guide shows the example's
files exactly as they are.

The guide marks a code block that shows a file as ```LANG file=PATH (the whole file, byte for
byte) or ```json record=PATH (one record of a JSONL file, formatted freely); a ```python block
without a mark whose last lines are `# ...` comments is run, and must print those lines."""

import json
import re
import subprocess
import sys
from itertools import takewhile

import pytest
from conftest import ROOT, run_tool

GUIDE = ROOT / "docs" / "authoring.md"
EXAMPLE = ROOT / "docs" / "example"
DOMAINS = EXAMPLE / "domains"
TASKS = EXAMPLE / "tasks.jsonl"
TRAP = "library-borrow-with-fines-trap"

BLOCK = re.compile(r"^```(\w+)(?: (file|record)=(\S+))?\n(.*?)^```$", re.M | re.S)


def blocks(kind: str | None) -> list[tuple[str, str, str]]:
    """(language, path, body) of the guide's code blocks with the given mark (None: unmarked)."""
    return [(lang, path, body) for lang, mark, path, body in BLOCK.findall(GUIDE.read_text())
            if (mark or None) == kind]


def example_tasks() -> list[dict]:
    return [json.loads(line) for line in TASKS.read_text().splitlines()]


def test_the_example_tasks_are_sound():
    p = run_tool("grade", "validate", "--domains", str(DOMAINS), str(TASKS))
    assert p.returncode == 0, p.stderr
    verdicts = [json.loads(line) for line in p.stdout.splitlines()]
    assert [v["task_id"] for v in verdicts] == [t["id"] for t in example_tasks()]
    assert all(v["sound"] for v in verdicts)
    assert "validate: 3 task(s) in " in p.stderr and "sound ×3, unsound ×0" in p.stderr


def test_the_guide_shows_what_validate_prints_on_the_example():
    p = run_tool("grade", "validate", "--domains", str(DOMAINS), str(TASKS))
    printed = p.stdout + re.sub(r" in [0-9.]+s:", " in 0.4s:", p.stderr)
    shown = re.search(r'^```\n(\{"task_id":"library-checkout".*?)^```$', GUIDE.read_text(),
                      re.MULTILINE | re.DOTALL)
    assert shown and shown[1] == printed


def test_dropping_the_trap_check_on_what_to_do_instead_fails_validate_naming_the_task(tmp_path):
    tasks = example_tasks()
    line = [t["id"] for t in tasks].index(TRAP) + 1
    trap = tasks[line - 1]
    trap["checks"] = [c for c in trap["checks"] if c["id"] != "told-fines"]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    p = run_tool("grade", "validate", "--domains", str(DOMAINS), str(path))
    assert p.returncode == 1
    assert (f"{path}:{line}: task {TRAP} is unsound: doing nothing passes every check: "
            "add a check on the intended outcome") in p.stderr
    assert [v["task_id"] for v in map(json.loads, p.stdout.splitlines()) if not v["sound"]] == [TRAP]


def test_the_trap_catches_the_forbidden_write():
    from endstate.core.env.domain import Domains
    from endstate.core.episode.replays import replay
    from endstate.core.grading.grader import Grader

    domains = Domains([str(DOMAINS)])
    task = next(t for t in example_tasks() if t["id"] == TRAP)
    grader = Grader(domains)
    assert grader.grade(replay(domains["library"], task, task["gold"]), task)["reward"] == 1
    forbidden = task["gold"] + [{"tool": "checkout_book", "args": {"member_id": "M9003", "book_id": "B9004"}}]
    graded = grader.grade(replay(domains["library"], task, forbidden), task)
    assert graded["reward"] == 0
    assert [(c["id"], c["passed"]) for c in graded["checks"]] == [("no-loan", False), ("told-fines", True),
                                                                  ("footprint", False)]
    assert graded["checks"][0]["detail"].startswith("loans where member_id='M9003': expected no row, found 1")


def test_the_guide_shows_every_example_domain_file_exactly():
    shown = {path: body for _, path, body in blocks("file")}
    files = sorted(str(p.relative_to(ROOT)) for p in DOMAINS.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    assert sorted(shown) == files, "show each file of docs/example/domains in the guide, once"
    for path, body in shown.items():
        assert body == (ROOT / path).read_text(), f"the guide's {path} differs from the file"


def test_the_guide_shows_example_task_records_as_they_are():
    shown = blocks("record")
    assert shown
    for _, path, body in shown:
        records = [json.loads(line) for line in (ROOT / path).read_text().splitlines()]
        assert json.loads(body) in records, f"the guide shows a record that is not in {path}"


@pytest.mark.parametrize("body", [b for lang, _, b in blocks(None)
                                  if lang == "python" and b.rstrip().splitlines()[-1].startswith("# ")])
def test_the_guide_python_snippets_print_what_they_say(body):
    expected = [line[2:] for line in takewhile(lambda line: line.startswith("# "),
                                               reversed(body.rstrip().splitlines()))][::-1]
    p = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == expected
