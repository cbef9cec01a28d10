"""docs/cli.md's reference section is generated from the click commands (scripts/cli_reference.py):
a flag added, renamed or re-documented without `make docs` fails here."""

import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import cli_reference


def test_the_cli_reference_is_current():
    page = cli_reference.PAGE.read_text()
    assert page == cli_reference.page_with(cli_reference.reference(), page), (
        "docs/cli.md's reference is stale: run `make docs` and commit docs/cli.md")


def test_every_command_is_in_the_reference():
    section = cli_reference.reference()
    for name, _, _ in cli_reference.commands():
        assert f"### {name}\n" in section and f"Usage: {name} " in section


def test_a_stale_page_is_rewritten_in_place(tmp_path):
    stale = f"# head\n\n{cli_reference.BEGIN}\nold text\n{cli_reference.END}\n\n## after\n"
    fresh = cli_reference.page_with("NEW\n", stale)
    assert fresh == "# head\n\nNEW\n## after\n"
    assert cli_reference.page_with("NEW\n", "# head\n") == "# head\n\nNEW\n"


def test_the_script_prints_what_it_writes():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py")],
                       capture_output=True, text=True, check=True)
    assert p.stdout == cli_reference.reference()
