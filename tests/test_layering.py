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


def test_domains_import_only_core():
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports endstate.{name}"
             for path in sorted((ROOT / "domains").rglob("*.py"))
             for line, name in endstate_imports(path) if name not in {"", "core"}]
    assert not wrong, "\n".join(wrong)


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
