"""Writing what `grade import tau2` translated: the domain folder (schema.sql and tables.md, seed.py
with its data under seed/, tools.py stubs, policy.md, checks.py when needed) and its task file."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson

from endstate.core.env.domain import Domain
from endstate.core.env.nested import Mapping, MappingError, document_rows, rebuild_document
from endstate.core.env.results import DEFAULT_FORMAT
from endstate.core.errors import EndstateError, ExitCode, InputError
from endstate.grade.authoring.nested_tables import column_guide, create_statements, infer_mapping
from endstate.grade.authoring.staging import check_domain_name, staged
from endstate.grade.authoring.tau2_declared import GeneratedTools, generated_tools
from endstate.grade.authoring.tau2_import import (
    ISSUE_STATUSES,
    ISSUE_TAG,
    KNOWN_BAD,
    Converted,
    Converter,
)
from endstate.grade.authoring.tau2_model import DataModel, model_warnings
from endstate.grade.authoring.tau2_reimport import mark_failing_gold, merge_schema
from endstate.grade.authoring.tau2_source import Source, init_documents
from endstate.grade.authoring.tau2_stubs import CHECKS_SOURCE, SEED_SOURCE
from endstate.grade.authoring.tau2_toolkit import Toolkit

SCHEMA_HEADER = """\
-- Tables of this domain, imported from tau2-bench by `grade import tau2`.
-- seed.py fills them from seed/db.json (the document, unchanged) through seed/mapping.json;
-- tables.md says where each table and column comes from in the document, and
-- endstate.api.rebuild_document(conn, mapping) gives the document back
-- (docs/domains.md). Names come from the document's fields: always quoted, never in a comment.

"""
TABLES_HEADER = """\
# The tables of domain {domain}

Imported from tau2-bench by `grade import tau2`: where each table and column of schema.sql comes
from in seed/db.json (seed/mapping.json says the same for code). An object of objects, or an
array, is a table: a row per entry (key column: the object key, or the item field equal to it) or
per item (key column: its position, from 0); one nested in a row is a child table
`<table>__<field>` whose first columns are its parent row's key; an object of scalars is flattened
into columns `<field>__<subfield>`; a field whose shape varies is JSON text; booleans are 0/1;
`_absent` lists the fields a row's item lacks.

"""


@dataclass
class Written:
    domain: Domain
    converted: Converted
    rows: int
    kept: list[str]  # files of the user's that --force did not overwrite
    tasks_file: Path
    tools: GeneratedTools
    notes: list[str]  # what the user should know: missing policy, data model, re-import


def write_domain(source: Source, out: Path, force: bool = False, model: DataModel | None = None,
                 toolkit: Toolkit | None = None) -> Written:
    """Write the domain folder `out` (its name is the domain's) for `source`, whole or not at all:
    into a temporary folder whose schema, seed and generated code are loaded before it is renamed
    to `out` (staging.staged)."""
    try:
        domain = out.resolve().name
    except (OSError, ValueError) as e:  # a name no file system takes (a lone surrogate)
        raise EndstateError(f"--out {out!r:.80}: not a folder name this system can use ({e})") from None
    check_domain_name(domain, f"--out {out}")
    if out.exists() and any(out.iterdir()) and not force:
        raise EndstateError(f"{out}: exists and is not empty; pass --force to overwrite the "
                            "imported files (an existing tools.py and checks.py are kept)")
    inits = init_documents(source)
    try:
        mapping = infer_mapping(source.document, *inits, *([model.shape] if model else []))
        document_rows(source.document, mapping)  # values SQLite cannot hold, before writing a file
    except MappingError as e:
        raise InputError(f"{_holder(source, inits, model)}: {e.message}") from None
    converted = Converter(source, domain, mapping).convert()
    tools = generated_tools(domain, converted.calls, toolkit)  # toolkit: --tools-from
    # every refusal happens here, before a write
    files = _files(source, domain, mapping, converted, tools.source)
    notes = [*source.warnings, *model_warnings(source.folder, source.document, model)]
    with staged(out, keep_existing=force) as tmp:
        # code is the user's once written: a re-import (--force) keeps it, and their schema edits
        kept = [f for f in ("tools.py", "checks.py") if (tmp / f).exists()]
        if (tmp / "schema.sql").exists():
            notes += _merge_schema(tmp, mapping, files)
        for name, data in files.items():
            if name not in kept:
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_bytes(data)
        rows = _load(Domain(domain, tmp), [f for f in files if f.endswith(".py") and f not in kept],
                     mapping, source.document)
        if "tools.py" in kept:
            notes += _mark_failing_gold(Domain(domain, tmp), source, converted)
            notes += _results_note(Domain(domain, tmp))
    return Written(Domain(domain, out), converted, rows, kept, out / "tasks" / f"{domain}.jsonl",
                   tools, notes)


def _merge_schema(folder: Path, mapping, files: dict[str, bytes]) -> list[str]:
    """schema.sql as the user left it, plus what the data now needs (tau2_reimport)."""
    mine = (folder / "schema.sql").read_text()
    try:
        previous = SCHEMA_HEADER + create_statements(
            Mapping.from_json((folder / "seed" / "mapping.json").read_bytes()))
    except (OSError, MappingError):
        previous = None  # no mapping beside it: whatever it holds is the user's
    merged = merge_schema(mine, previous, files["schema.sql"].decode(), mapping)
    files["schema.sql"] = merged.schema.encode()
    if mine == previous:
        return []
    if merged.schema == mine:
        return ["kept your edited schema.sql as it is: it has every table and column the data needs"]
    return [f"kept your edits to schema.sql and added what the data now needs: "
            f"{', '.join(merged.added) or 'nothing'}"]


def _mark_failing_gold(domain: Domain, source: Source, converted: Converted) -> list[str]:
    """With the tools written, mark the gold calls that fail (as tau2's fail) in the task file."""
    try:
        marked = mark_failing_gold(domain, converted.tasks)
    except EndstateError as e:  # the user's tools.py, half written: the import itself stands
        return [f"gold calls not checked for failures: your tools do not run yet ({e.message})"]
    (domain.path / "tasks" / f"{domain.name}.jsonl").write_bytes(_task_lines(source, converted))
    lines = [f"replayed the gold with your tools: marked {marked.calls} gold call(s) that fail "
             "\"fails\": true (tau2 logs such an error and goes on)"]
    if marked.unchecked:
        lines.append(f"{len(marked.unchecked)} task(s) call a tool not written yet, so their "
                     "failing calls are not marked; re-import with --force once it is")
    return lines


def _results_note(domain: Domain) -> list[str]:
    """A kept tools.py whose results the agent does not see as tau2 shows them (written by an
    import that predates RESULTS, or edited)."""
    try:
        name = getattr(domain.tools_module, "RESULTS", DEFAULT_FORMAT)
    except EndstateError:
        return []  # _mark_failing_gold said why it does not load
    if name == "tau2":
        return []
    note = (f"your tools.py shows tool results to the agent in the format {name!r}, not as tau2 "
            "does (a string quoted as JSON, say): add the line RESULTS = \"tau2\" to it "
            "(docs/authoring.md, porting a tau2-bench tool)")
    return [note]


def _holder(source: Source, inits: list[dict], model: DataModel | None) -> Path:
    """The file holding what the mapping refused (a field named sqlite_master, say): db.json if
    the document alone does not map, else tasks.json if its inits do not, else the data model."""
    for path, shapes in ((source.db_file, []), (source.tasks_file, inits)):
        try:
            infer_mapping(source.document, *shapes)
        except MappingError:
            return path
    return model.path if model else source.db_file


def _files(source: Source, domain: str, mapping, converted: Converted,
           tools: str) -> dict[str, bytes]:
    """Every file the import writes, by its path in the domain folder."""
    data = (source.db_file.read_bytes() if source.db_file.suffix == ".json"
            else orjson.dumps(source.document, option=orjson.OPT_INDENT_2))  # TOML dates: ISO text
    files = {"seed/db.json": data, "seed/mapping.json": mapping.to_json() + b"\n",
             "schema.sql": (SCHEMA_HEADER + create_statements(mapping)).encode(),
             "tables.md": (TABLES_HEADER.format(domain=domain) + column_guide(mapping)).encode(),
             "seed.py": SEED_SOURCE.format(domain=domain).encode(),
             "policy.md": source.policy.encode(),
             "tools.py": tools.encode(),
             f"tasks/{domain}.jsonl": _task_lines(source, converted)}
    if converted.action_checks:
        files["checks.py"] = CHECKS_SOURCE.format(domain=domain).encode()
    return files


def _task_lines(source: Source, converted: Converted) -> bytes:
    lines = []
    for task in converted.tasks:
        try:
            lines.append(orjson.dumps(task) + b"\n")
        except TypeError as e:  # a lone surrogate (a \ud800 escape), which no UTF-8 line holds
            raise InputError(f"{source.tasks_file}: task {task['id']!r:.60} cannot be a JSONL record "
                             f"({e}); fix that text in tasks.json") from None
    return b"".join(lines)


def _load(domain: Domain, generated: list[str], mapping: Mapping, document: dict) -> int:
    """Load what was generated (a module that does not load is endstate's bug, never the data's)
    and build the seed once, proving the tables and data agree and that the tables give the
    document back exactly; the number of rows."""
    try:
        domain.tables
        if "tools.py" in generated:
            domain.tools_module
        if "checks.py" in generated:
            domain.checks_module
        seed, _ = domain.build_seed()
    except MappingError as e:
        raise InputError(f"seed/db.json: {e.message}") from None
    except (EndstateError, sqlite3.Error, SyntaxError) as e:
        raise EndstateError(f"internal error: the generated domain does not load ({e}); nothing "
                            "was written. Please report it.", ExitCode.INTERNAL) from None
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    try:
        if rebuild_document(conn, mapping) != document:
            raise EndstateError("internal error: the tables do not give the document back as it "
                                "is; nothing was written. Please report it, with db.json.",
                                ExitCode.INTERNAL)
        return sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in domain.tables)
    finally:
        conn.close()


def issues_warning(issues: dict[str, list[str]]) -> list[str]:
    """The imported tasks whose tau2 `issues` record a problem: counted by status, named."""
    counts = Counter(status for statuses in issues.values() for status in statuses)
    by_status = ", ".join(f"{counts[s]} {s}" for s in ISSUE_STATUSES if counts[s])
    warning = (f"warning: {len(issues)} task(s) carry issues tau2's authors recorded "
               f"({by_status}): tau2 id(s) {', '.join(issues)}; each is tagged {ISSUE_TAG}STATUS, "
               f"one with an open issue also {KNOWN_BAD}, and its issues are in its notes: read "
               f"them before training or reporting on these tasks (--tag '{ISSUE_TAG}*' selects "
               "them)")
    return [warning]


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
    lines += [f"note: {w}" for w in written.notes]
    if c.vacuous:
        lines.append(f"  {len(c.vacuous)} task(s) pass an agent that does nothing (no gold call "
                     "and nothing to say; tau2 scores them so too): tau2 id(s) "
                     f"{', '.join(c.vacuous)}; grade validate calls them unsound: add a check or "
                     "leave them out")
    if c.issues:
        lines += issues_warning(c.issues)
    if c.documents:
        lines.append(f"  {len(c.documents)} task(s) cite required_documents, tau2's knowledge base "
                     "of documents, which is not in the database and not imported: give the agent "
                     "a tool that reads them, or the answers they hold are out of its reach")
    lines += [f"kept {out / f}: it was there already" for f in written.kept]
    if "tools.py" not in written.kept:
        lines += written.tools.report(out / "tools.py")
    tasks = written.tasks_file
    lines += ["next:",
              (f"  1. write each tool in {out / 'tools.py'} against the tables of "
               f"{out / 'schema.sql'}"),
              f"  2. grade validate --domains {out} {tasks}   # names the tools not written yet",
              f"  3. rollout run --domains {out} {tasks} --user llm ...   # LLM users, no scripts"]
    return lines
