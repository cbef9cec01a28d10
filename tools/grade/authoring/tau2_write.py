"""Writing what `grade import tau2` translated: the domain folder (schema.sql, seed.py with its data
under seed/, tools.py stubs, policy.md, checks.py when needed) and its task file."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson

from endstate.core.env.domain import Domain
from endstate.core.env.nested import MappingError, document_rows
from endstate.core.errors import EndstateError, InputError
from endstate.grade.authoring.nested_tables import create_statements, infer_mapping
from endstate.grade.authoring.tau2_import import Converted, Converter, Source
from endstate.grade.authoring.tau2_stubs import CHECKS_SOURCE, SEED_SOURCE, tools_source

SCHEMA_HEADER = """\
-- Tables of the {domain} domain, imported from tau2-bench by `grade import tau2` ({source}).
-- seed.py fills them from seed/db.json (the document, unchanged) through seed/mapping.json:
--   an object of objects, or an array, is a table: a row per entry (key column: the object key, or
--   the item field equal to it) or per item (key column: its position, from 0); one nested in a
--   row is a child table <table>__<field> whose first columns are its parent row's key;
--   an object of scalars is flattened into columns <field>__<subfield>; a field whose shape varies
--   is JSON text; booleans are 0/1; `_absent` lists the fields a row's item lacks.
-- The mapping is reversible: endstate.core.env.nested.rebuild_document(conn, mapping) gives the
-- document back (docs/domains.md).

"""


@dataclass
class Written:
    domain: Domain
    converted: Converted
    rows: int
    kept: list[str]  # files of the user's that --force did not overwrite
    tasks_file: Path


def write_domain(source: Source, out: Path, force: bool = False) -> Written:
    """Write the domain folder `out` (its name is the domain's) for `source`; the seed is built once
    to prove the tables and data agree."""
    domain = out.resolve().name
    if out.exists() and any(out.iterdir()) and not force:
        raise EndstateError(f"{out}: exists and is not empty; pass --force to overwrite the "
                            "imported files (an existing tools.py and checks.py are kept)")
    try:
        mapping = infer_mapping(source.document)
        document_rows(source.document, mapping)  # values SQLite cannot hold, before writing a file
    except MappingError as e:
        raise InputError(f"{source.db_file}: {e.message}") from None
    converted = Converter(source, domain, mapping).convert()
    (out / "seed").mkdir(parents=True, exist_ok=True)
    (out / "tasks").mkdir(exist_ok=True)
    data = (source.db_file.read_bytes() if source.db_file.suffix == ".json"
            else orjson.dumps(source.document, option=orjson.OPT_INDENT_2))  # TOML dates: ISO text
    (out / "seed" / "db.json").write_bytes(data)
    (out / "seed" / "mapping.json").write_bytes(mapping.to_json() + b"\n")
    (out / "schema.sql").write_text(SCHEMA_HEADER.format(domain=domain, source=source.db_file.name)
                                    + create_statements(mapping))
    (out / "seed.py").write_text(SEED_SOURCE.format(domain=domain))
    (out / "policy.md").write_text(source.policy)
    # code is the user's once written: a re-import (--force) keeps it
    kept = [f for f in ("tools.py", "checks.py") if (out / f).exists()]
    if "tools.py" not in kept:
        (out / "tools.py").write_text(tools_source(domain, converted.calls))
    if converted.action_checks and "checks.py" not in kept:
        (out / "checks.py").write_text(CHECKS_SOURCE.format(domain=domain))
    tasks_file = out / "tasks" / f"{domain}.jsonl"
    tasks_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in converted.tasks))
    built = Domain(domain, out)
    conn_bytes, _ = built.build_seed()
    rows = _row_count(built, conn_bytes)
    return Written(built, converted, rows, kept, tasks_file)


def _row_count(domain: Domain, seed: bytes) -> int:
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    try:
        return sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in domain.tables)
    finally:
        conn.close()


def report(written: Written, out: Path) -> list[str]:
    """What the import did and what to do next, for stderr."""
    c, name = written.converted, written.domain.name
    splits = Counter(t.get("split", "no split") for t in c.tasks)
    total = len(c.tasks) + len(c.skipped)
    lines = [(f"wrote {out}: domain {name}, {len(written.domain.tables)} tables, "
              f"{written.rows:,} rows"),
             f"wrote {written.tasks_file}: {len(c.tasks)} of {total} tasks ("
             + ", ".join(f"{s} ×{n}" for s, n in splits.items()) + ")"]
    lines += [f"  skipped tau2 task {task_id}: {why}" for task_id, why in c.skipped]
    if c.vacuous:
        lines.append(f"  {len(c.vacuous)} task(s) pass an agent that does nothing (no gold call "
                     "and nothing to say; tau2 scores them so too): tau2 id(s) "
                     f"{', '.join(c.vacuous)}; grade validate calls them unsound: add a check or "
                     "leave them out")
    lines += [f"kept {out / f}: it was there already" for f in written.kept]
    if "tools.py" not in written.kept:
        lines.append(f"tools are code, so they are not translated: {out / 'tools.py'} has a typed "
                     f"stub for each of the {len(c.calls)} tools the gold calls use, failing with "
                     "'not written yet'")
    tasks = written.tasks_file
    lines += ["next:",
              (f"  1. write each tool in {out / 'tools.py'} against the tables of "
               f"{out / 'schema.sql'}"),
              f"  2. grade validate --domains {out} {tasks}   # names the tools not written yet",
              f"  3. rollout run --domains {out} {tasks} --user llm ...   # LLM users, no scripts"]
    return lines
