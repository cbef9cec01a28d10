"""The layering rule, read from the source: a tool package imports only endstate.core and its own
modules; core imports no tool; a domain imports only core. What two tools share lives in core."""

import ast
from pathlib import Path

import pytest
from conftest import ROOT

TOOLS = ("grade", "bucket", "evalstats", "rollout", "probe", "grpo")


def endstate_imports(path: Path) -> list[tuple[int, str]]:
    """(line, second component) of every `endstate.X` import in the file; "" for `endstate` itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "endstate":
                found.append((node.lineno, parts[1] if len(parts) > 1 else ""))
    return found


def allowed(package: str) -> set[str]:
    return {"", "core"} | ({package} if package in TOOLS else set())


@pytest.mark.parametrize("package", [*TOOLS, "core"])
def test_a_package_imports_only_core_and_itself(package):
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports endstate.{name}"
             for path in sorted((ROOT / "tools" / package).rglob("*.py"))
             for line, name in endstate_imports(path) if name not in allowed(package)]
    assert not wrong, "\n".join(wrong)


DOMAIN_FOLDERS = ("domains", "docs/example/domains", "tests/grpo_fixtures/buttons")


def test_domains_import_only_the_public_api():
    """A domain is written against endstate.api, as a user's own domain is (docs/api.md)."""
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports endstate.{name}"
             for folder in DOMAIN_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line, name in endstate_imports(path) if name != "api"]
    assert not wrong, "\n".join(wrong)


def test_no_package_imports_the_public_api():
    """endstate.api sits above every tool: core and the tools never import it (only domains,
    plugins and programs do)."""
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports endstate.api"
             for path in sorted((ROOT / "tools").rglob("*.py")) if path.name != "api.py"
             for line, name in endstate_imports(path) if name == "api"]
    assert not wrong, "\n".join(wrong)


# core's rooms, lowest first: a sub-package imports only rooms below it (and errors, registry).
CORE_LAYERS = ("console", "stats", "figures", "records", "env", "wire", "agent", "episode", "grading",
               "cli")
CORE_BASE = ("errors", "registry", "deprecation")  # modules every room may import
# old import paths kept for one release (core.deprecation): each only warns and re-exports
CORE_MOVED = ("tools", "nested", "interpret", "domain", "grader")


def core_room(path: Path) -> str:
    return path.relative_to(ROOT / "tools" / "core").parts[0].removesuffix(".py")


def core_imports(path: Path) -> list[tuple[int, str]]:
    """(line, room) of every `endstate.core.ROOM` import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        found += [(node.lineno, name.split(".")[2]) for name in names
                  if name.startswith("endstate.core.") and len(name.split(".")) > 2]
    return found


def test_core_rooms_import_only_rooms_below_them():
    """No circle and no upward import between core's sub-packages: records never reaches for the
    episode, the episode never for grading. stats stands alone (pure functions)."""
    rank = {room: i for i, room in enumerate(CORE_LAYERS)}
    wrong = []
    for path in sorted((ROOT / "tools" / "core").rglob("*.py")):
        room = core_room(path)
        if room in (*CORE_BASE, *CORE_MOVED) or room == "__init__":
            continue
        assert room in rank, f"{path.relative_to(ROOT)}: core/{room} is not in CORE_LAYERS"
        for line, target in core_imports(path):
            if target != room and target not in CORE_BASE and (
                    rank[target] > rank[room] or "stats" in (room, target)):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: core/{room} imports core/{target}")
    assert not wrong, "\n".join(wrong)
    assert {p.name for p in (ROOT / "tools" / "core").iterdir() if p.suffix == ".py"} == \
        {"__init__.py", *(f"{m}.py" for m in (*CORE_BASE, *CORE_MOVED))}, \
        "core's top level holds only the base modules and the old paths"


@pytest.mark.parametrize("old", CORE_MOVED)
def test_an_old_path_only_warns_and_re_exports(old):
    """Nothing is defined at an old path: it is the new module's names and a DeprecationWarning."""
    tree = ast.parse((ROOT / "tools" / "core" / f"{old}.py").read_text())
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "ImportFrom"}, kinds
    assert any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
               and getattr(n.value.func, "id", "") == "moved" for n in tree.body)


def test_the_rule_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom endstate.rollout.cli import main\nimport endstate.grade.cli\n")
    assert [n for _, n in endstate_imports(bad)] == ["rollout", "grade"]


def test_every_flag_is_documented():
    """docs/cli.md holds the shared vocabulary; a tool's own flags are in its page (grpo's as
    config keys, probe's in rollout.md)."""
    import importlib
    import re

    import click

    missing = []
    for tool in TOOLS:
        cli = importlib.import_module(f"endstate.{tool}.cli").cli
        commands = [cli, *cli.commands.values()] if isinstance(cli, click.Group) else [cli]
        page = ROOT / "docs" / f"{'rollout' if tool == 'probe' else tool}.md"
        docs = (ROOT / "docs" / "cli.md").read_text() + page.read_text()
        for command in commands:
            for p in command.params:
                flag = max(p.opts, key=len) if isinstance(p, click.Option) else None
                if flag and not re.search(re.escape(flag) + r"(?![\w-])", docs) \
                        and f"`{p.name}`" not in docs:
                    missing.append(f"{tool} {command.name}: {flag}")
    assert not missing, "undocumented flags:\n" + "\n".join(missing)


SIZED = ("tools", "tasks/templates", "domains")  # endstate, its task generators, its domains


def test_modules_and_functions_stay_small():
    """House rule: no module in tools/, tasks/templates/ or domains/ over 400 lines, no function
    over 60."""
    too_big = []
    for path in sorted(p for folder in SIZED for p in (ROOT / folder).rglob("*.py")):
        source = path.read_text()
        if source.count("\n") > 400:
            too_big.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and node.end_lineno - node.lineno >= 60:
                too_big.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} is "
                               f"{node.end_lineno - node.lineno + 1} lines")
    assert not too_big, "\n".join(too_big)


def test_no_command_takes_more_than_ten_parameters():
    """A command with many flags takes them as settings objects (cli.options.bundled, run_options,
    judge_options), not as a long parameter list."""
    import importlib
    import inspect

    import click

    long = []
    for tool in TOOLS:
        cli = importlib.import_module(f"endstate.{tool}.cli").cli
        commands = [cli, *cli.commands.values()] if isinstance(cli, click.Group) else [cli]
        for command in commands:
            if command.callback is None:
                continue
            fn = inspect.unwrap(command.callback)
            if len(inspect.signature(fn).parameters) > 10:
                long.append(f"{tool} {command.name}: {fn.__name__}{inspect.signature(fn)}")
    assert not long, "\n".join(long)
