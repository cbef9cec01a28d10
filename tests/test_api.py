"""The public API (endstate.api, docs/api.md): what it promises is there and documented, it takes
and returns typed records, a program gets what the CLIs get, and the old import paths still work,
saying what to import instead."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import warnings
from fractions import Fraction
from itertools import takewhile

import msgspec
import pytest
from conftest import ROOT, run_tool

from endstate import api
from endstate.core.registry import entry_point_group

GUIDE = ROOT / "docs" / "api.md"
BLOCK = re.compile(r"^```(\w+)(?: file=(\S+))?\n(.*?)^```$", re.MULTILINE | re.DOTALL)
EXAMPLE = ROOT / "docs" / "example"


def blocks() -> list[tuple[str, str | None, str]]:
    return [(lang, path or None, body) for lang, path, body in BLOCK.findall(GUIDE.read_text())]


@pytest.mark.parametrize("body", [b for lang, path, b in blocks() if lang == "python" and not path
                                  and b.rstrip().splitlines()[-1].startswith("# ")])
def test_the_guide_python_snippets_print_what_they_say(body):
    expected = [line[2:] for line in takewhile(lambda line: line.startswith("# "),
                                               reversed(body.rstrip().splitlines()))][::-1]
    p = subprocess.run([sys.executable, "-c", body], check=False, capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == expected


def test_the_guide_shows_the_example_plugin_files_exactly():
    shown = {path: body for _, path, body in blocks() if path}
    assert len(shown) >= 5
    for path, body in shown.items():
        assert body == (ROOT / path).read_text(), f"the guide's {path} differs from the file"


def test_every_public_name_resolves_and_is_in_the_guide():
    text = GUIDE.read_text()
    missing = [name for name in api.__all__ if f"`{name}" not in text]
    assert not missing, f"docs/api.md does not name {missing}"
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None


def registries_in_code() -> set[str]:
    """The entry-point group of every Registry the code makes, read from the source."""
    whats = set()
    for path in (ROOT / "tools").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Registry" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                whats.add(node.args[0].value)
    return {entry_point_group(what) for what in whats}


def test_the_guide_lists_every_entry_point_group():
    table = re.findall(r"^\| `(endstate\.\w+)` \|", GUIDE.read_text(), re.MULTILINE)
    in_code = registries_in_code()
    assert not in_code - set(table), f"docs/api.md, Plugins: add {sorted(in_code - set(table))}"
    # grpo's registries are listed by the groups they will have; every other row is in the code
    assert set(table) - in_code <= {"endstate.policy_losses", "endstate.advantage_estimators",
                                    "endstate.kl_penalties"}


# -- a program --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library():
    return api.load_domains(EXAMPLE / "domains"), api.load_tasks(EXAMPLE / "tasks.jsonl")


def test_replay_and_grade_take_and_give_typed_records(library):
    domains, tasks = library
    task = next(t for t in tasks if t.id == "library-borrow-with-fines-trap")
    assert isinstance(task, api.Task)
    grader = api.Grader(domains)
    gold = api.replay(task, domains=domains)
    assert isinstance(gold, api.Episode) and gold.termination == "replay"
    assert grader.grade(gold, task).reward == 1
    forbidden = [*task.gold, {"tool": "checkout_book", "args": {"member_id": "M9003", "book_id": "B9004"}}]
    graded = grader.grade(api.replay(task, forbidden, domains=domains), task)
    assert isinstance(graded, api.GradedEpisode) and graded.reward == 0
    assert [(c.id, c.passed) for c in graded.checks] == [("no-loan", False), ("told-fines", True),
                                                         ("footprint", False)]
    assert api.grade(gold, msgspec.to_builtins(task), domains=domains).reward == 1  # a dict too


def test_summary_is_what_evalstats_prints_for_the_same_attempts(library, tmp_path):
    domains, tasks = library
    grader = api.Grader(domains)
    attempts = []
    for task in tasks:
        for attempt, steps in enumerate((task.gold, [], task.gold)):
            graded = grader.grade(api.replay(task, steps, domains=domains), task)
            attempts.append(msgspec.structs.replace(api.attempt_of(graded), attempt=attempt))
    metrics = api.summary(attempts, ks=[1, 2])
    # by hand: every task passes 2 of its 3 attempts
    assert Fraction(metrics["overall"]["pass_at_1"]).limit_denominator(10) == Fraction(2, 3)
    assert metrics["overall"]["observed_all"]["count"] == 0
    path = tmp_path / "attempts.jsonl"
    with path.open("wb") as out:
        assert api.write_records(attempts, out, "attempt") == 9
    printed = run_tool("evalstats", "--k", "1,2", str(path))
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads(json.dumps(metrics))
    assert api.read_records("attempt", path) == attempts


def test_a_bad_record_names_its_line(tmp_path):
    from endstate.core.errors import InputError

    path = tmp_path / "tasks.jsonl"
    path.write_text((EXAMPLE / "tasks.jsonl").read_text().splitlines()[0] + "\n{\"id\": 3}\n")
    with pytest.raises(InputError, match=f"{path}:2: "):
        api.load_tasks(path)


class Told:
    """A session that says one thing and stops: no model (Backend is a public extension point)."""

    system = "Be brief."

    def observe(self, new):
        pass

    async def act(self):
        return api.Turn(api.Parsed("Hello."), "Hello.", api.Usage(5, 2))


class Saying:
    def open(self, domain, tool_specs):
        return Told()

    def close(self):
        pass


def test_run_episodes_gives_the_episodes_in_task_and_attempt_order(library):
    domains, tasks = library
    api.BACKENDS.register("saying-test")(api.Backend(lambda cfg, live=None: Saying(), "says hello",
                                                      endpoint=False))
    try:
        episodes = api.run_episodes(tasks[:2], api.RunConfig(backend="saying-test", jobs=4),
                                    repeats=2, domains=domains)
    finally:
        api.BACKENDS.unregister("saying-test")
    assert [(e.task_id, e.attempt) for e in episodes] == [
        (t.id, a) for t in tasks[:2] for a in (0, 1)]
    assert all(isinstance(e, api.Episode) and e.policy.backend == "saying-test" for e in episodes)
    assert episodes[0].messages[2] == api.AssistantMessage("Hello.", raw="Hello.")


# -- the old import paths ---------------------------------------------------------------------------

def test_a_domain_written_against_the_old_tools_path_loads_and_says_what_to_import(tmp_path):
    folder = tmp_path / "domains" / "library"
    shutil.copytree(EXAMPLE / "domains" / "library", folder)
    tools = folder / "tools.py"
    tools.write_text(tools.read_text().replace("from endstate.api import Db, ToolError, tool",
                                               "from endstate.core.tools import Db, ToolError, tool"))
    line = tools.read_text().splitlines().index("from endstate.core.tools import Db, ToolError, tool") + 1
    p = run_tool("grade", "validate", "--domains", str(tmp_path / "domains"),
                 str(EXAMPLE / "tasks.jsonl"))
    assert p.returncode == 0, p.stderr
    assert all(json.loads(v)["sound"] for v in p.stdout.splitlines())
    assert (f"{tools}:{line}: DeprecationWarning: endstate.core.tools is deprecated and goes in the "
            "next release: from endstate.api import Db, ToolError, tool (and insert_rows, "
            "customer_finder, positive_cents, ...: every domain helper is there)\n"
            "  from endstate.core.tools import Db, ToolError, tool\n") in p.stderr


@pytest.mark.parametrize("statement,instead", [
    ("from endstate.core.tools import Db, ToolError, tool, insert_rows", "from endstate.api import Db"),
    ("from endstate.core.nested import Mapping, insert_document", "from endstate.api import Mapping"),
    ("from endstate.core.domain import Domains", "from endstate.api import load_domains"),
    ("from endstate.core.grader import Grader", "from endstate.api import Grader"),
    ("from endstate.core.interpret import render_signature", "from endstate.api import render_signature"),
    ("from endstate.core.episode import replay", "from endstate.api import replay"),
    ("from endstate.core.records import read_jsonl, write_jsonl", "from endstate.api import read_records"),
])
def test_an_old_import_path_works_with_a_deprecation_warning(statement, instead):
    """In a fresh process: a module imported once warns once."""
    code = f"{statement}\nprint('ok')"
    p = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=False,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "DeprecationWarning" in p.stderr and instead in p.stderr
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr


def test_the_old_replay_is_the_function_it_was(library):
    domains, tasks = library
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from endstate.core.episode import replay

    record = msgspec.to_builtins(tasks[0])
    assert replay(domains["library"], record, record["gold"])["termination"] == "replay"
    from endstate.core import episode
    assert not hasattr(episode, "no_such_name")  # other names are no attribute
