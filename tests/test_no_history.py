"""README, docs, code, tests and scripts describe the product as it is now: its history lives in
git. A line naming a work session ("stop 41", "this stop"), an issue ("issue 33", "the issue's
figures") or a dated measurement ("(2026-12-01)", "on this 2-core box") fails here, naming the
file and line. Figures live in docs/benchmarks.md, with how to reproduce them."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

# What a reader of the product has no use for: the project's own bookkeeping.
HISTORY = re.compile(
    r"\bstops? \d+\b|\bstop-\d+\b|\b(?:this|last|next) stop\b"  # work sessions
    r"|\bissues? #?\d+\b|\bthe issue\b"  # the tracker
    r"|\(20\d\d-\d\d-\d\d\b|\b(?:runs of|since|measured on) 20\d\d-\d\d-\d\d\b"  # dated runs
    r"|\bthis (?:\d-core )?box\b",  # the machine a figure was taken on
    re.IGNORECASE)
SCANNED = ["README.md", "Makefile", ".ci/run", "pyproject.toml", "docs/**/*.md", "tools/**/*.py",
           "tests/**/*.py", "scripts/*", "acceptance/*", "bench/*.py", "slurm/*", "configs/**/*"]
README_LINES = 200


def scanned_files() -> list[str]:
    files = {p for pattern in SCANNED for p in ROOT.glob(pattern) if p.is_file()}
    return sorted(str(p.relative_to(ROOT)) for p in files if "__pycache__" not in p.parts)


def history_lines(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if HISTORY.search(line)]


@pytest.mark.parametrize("pattern_hit", ["as measured at stop 44", "the stop-43 tree", "This stop:",
                                         "the default since issue 33", "the issue's figures",
                                         "(2026-12-01, 2 cores)", "over the runs of 2026-12-04",
                                         "on this 2-core box"])
def test_the_rule_sees_each_kind_of_history_line(pattern_hit):
    assert history_lines(pattern_hit)


@pytest.mark.parametrize("product_line", ["Today is 2026-01-15.", 'NOW = "2026-01-15T12:00:00"',
                                          "the agent stops (`user_stop`)", "issue_provisional_credit",
                                          "a 2-core box", "`rollout run` stops at 30 turns"])
def test_the_rule_leaves_the_product_alone(product_line):
    assert not history_lines(product_line)


def test_no_history_in_the_product():
    this = str((ROOT / "tests" / "test_no_history.py").relative_to(ROOT))
    hits = [f"{name}:{n}: {line}" for name in scanned_files() if name != this
            for n, line in history_lines((ROOT / name).read_text(errors="replace"))]
    assert not hits, "history belongs in git, figures in docs/benchmarks.md:\n" + "\n".join(hits)


def test_the_readme_is_a_product_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines: move detail to docs/"
