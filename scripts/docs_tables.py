"""Regenerate the tables of docs/ that are derived from code (as sqlite-utils keeps its CLI
reference with cog): grpo's settings table in docs/grpo.md, between its two marker lines.

    python scripts/docs_tables.py            # rewrite the tables in place (make docs)
    python scripts/docs_tables.py --check    # exit 1, naming the file, when one is stale

tests/test_grpo_settings.py runs the check."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- settings table: generated from the declarations by `make docs`; do not edit -->\n"
END = "<!-- end of the settings table -->\n"


def grpo_settings() -> str:
    from endstate.grpo.cli import train
    from endstate.grpo.config import DECLARED, TrainConfig
    from endstate.grpo.settings import settings_table

    return settings_table(TrainConfig, DECLARED, train)


TABLES = {ROOT / "docs" / "grpo.md": grpo_settings}


def regenerated(text: str, table: str, path: Path) -> str:
    """`text` with what lies between the markers replaced by `table`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise SystemExit(f"{path}: needs one line {BEGIN.strip()!r} and one {END.strip()!r}")
    head, rest = text.split(BEGIN)
    return head + BEGIN + table + END + rest.split(END, 1)[1]


def main(argv: list[str]) -> int:
    stale = []
    for path, render in TABLES.items():
        text = path.read_text()
        new = regenerated(text, render(), path)
        if new != text:
            stale.append(path)
            if "--check" not in argv:
                path.write_text(new)
    if stale and "--check" in argv:
        print(f"stale: {', '.join(map(str, stale))}; run make docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
