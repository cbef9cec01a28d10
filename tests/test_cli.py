"""Every console script and subcommand has help text with a runnable example, and is documented."""

import tomllib

import click
import pytest
from conftest import ROOT, run_tool

SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def commands():
    for name, target in SCRIPTS.items():
        module, _, attr = target.partition(":")
        cli = getattr(__import__(module, fromlist=["cli"]), "cli")
        yield name, [], cli
        if isinstance(cli, click.Group):
            for sub, cmd in cli.commands.items():
                yield name, [sub], cmd


@pytest.mark.parametrize("name, path, cmd", list(commands()), ids=lambda x: str(x))
def test_help_has_an_example_and_the_command_is_documented(name, path, cmd):
    p = run_tool(name, *path, "--help")
    assert p.returncode == 0, p.stderr
    assert "Example" in p.stdout or f"{name} " in p.stdout.split("Options:")[0]
    docs = (ROOT / "README.md").read_text() + "".join(f.read_text() for f in (ROOT / "docs").glob("*.md"))
    assert " ".join([name, *path]) in docs
