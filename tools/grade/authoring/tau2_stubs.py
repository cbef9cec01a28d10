"""The code `grade import tau2` writes around the data: tools.py with one typed stub per tool the
gold calls use (tools are code and are not translated) and a TypedDict per shape of object they
pass, seed.py, and checks.py for tasks whose reward requires tau2's exact tool calls. With
--tools-from, tau2_declared.py writes the stubs from tau2's toolkit through `assemble`."""

from __future__ import annotations

import builtins
import itertools
import json
import keyword
import re
import unicodedata
from typing import Any

from endstate.core.errors import InputError

# A stub is marked as writing when its name starts so (a guess the author checks): grade validate
# drops each writing gold call and needs a check to notice, so read tools must not be marked.
WRITE_PREFIXES = (
    "activate_", "add_", "apply_", "approve_", "assign_", "block_", "book_", "cancel_", "change_",
    "close_", "create_", "deactivate_", "delete_", "disable_", "downgrade_", "enable_", "exchange_",
    "file_", "grant_", "hire_", "issue_", "lock_", "make_", "modify_", "open_", "pay_", "place_",
    "record_", "refuel_", "refund_", "register_", "reject_", "remove_", "renew_", "rent_",
    "reschedule_", "reserve_", "reset_", "resume_", "return_", "schedule_", "send_", "set_",
    "submit_", "suspend_", "toggle_", "transfer_funds", "unblock_", "unlock_", "update_",
    "upgrade_")
HEADER_NAMES = ("Db", "ToolError", "tool", "NOW", "RESULTS", "NOT_WRITTEN", "NotRequired",
                "TypedDict", "Any", "Literal", "Path", "Documents", "DOCS")
_SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}


def python_name(name: Any) -> bool:
    """Whether `name` is a Python name that stays itself: an identifier, not a keyword, and
    unchanged by the NFKC normalization Python applies to identifiers (`ﬁle` would define `file`,
    and two such names one parameter twice)."""
    return (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
            and unicodedata.normalize("NFKC", name) == name)


def docstring_text(text: str) -> str:
    """`text` as it may stand inside a generated triple-quoted docstring and read back the same:
    backslashes doubled, characters that do not print escaped, and no quote that could close the
    string (one followed by another, or the last)."""
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                   else f"\\U{ord(c):08x}" for c in text.replace("\\", "\\\\"))
    return re.sub(r'"(?=")|"$', r'\\"', text)


class Records:
    """The TypedDicts the stubs' annotations name: one per shape of JSON object in the gold
    arguments (a passenger, a payment), so the agent's tool schema lists its fields. A shape seen
    twice (the same fields and types) is one class."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self.bodies: dict[str, str] = {}  # class name -> its fields, one line each
        # names tools.py binds otherwise, and builtins (a class Exception breaks `except Exception`)
        self.reserved = {*HEADER_NAMES, *reserved, *dir(builtins)}

    def add(self, name: str, fields: list[str]) -> str:
        body = "\n".join(fields)
        known = next((n for n, b in self.bodies.items() if b == body), None)
        if known:
            return known
        taken = {*self.bodies, *self.reserved}
        if not python_name(name):  # `none` -> None, `_1` -> 1
            name = "Record" + name if python_name("Record" + name) else "Record"
        unique = next(c for c in (name, *(f"{name}{n}" for n in range(2, len(taken) + 2)))
                      if c not in taken)
        self.bodies[unique] = body
        return unique

    def imports(self, also: set[str] = frozenset()) -> str:
        """The typing import the classes and the names in `also` need ("" when none)."""
        needs = set(also)
        if self.bodies:
            needs.add("TypedDict")
        if any("NotRequired[" in b for b in self.bodies.values()):
            needs.add("NotRequired")
        return f"from typing import {', '.join(sorted(needs))}\n" if needs else ""

    def sources(self) -> list[str]:
        return [f"class {name}(TypedDict):\n{body}" for name, body in self.bodies.items()]


def _camel(name: str, item: bool = False) -> str:
    """The class name for the value of argument or field `name` (one item of it, for a list)."""
    if item and name.endswith("s") and not name.endswith("ss"):
        name = name[:-1]
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Record"


def _type_of(values: list[Any], name: str, records: Records) -> str | None:
    """The annotation that fits every value seen for one argument or field; None when all are
    null. An object with Python-name keys becomes a TypedDict in `records`."""
    values = [v for v in values if v is not None]
    names: set[str] = set()
    lists = [v for v in values if isinstance(v, list)]
    if lists:
        inner = _type_of([x for v in lists for x in v], name, records)
        names.add(f"list[{inner}]" if inner else "list")
    objects = [v for v in values if isinstance(v, dict)]
    if objects:
        names.add(_record(objects, name, records))
    names |= {_SCALARS.get(type(v), "str") for v in values if not isinstance(v, (list, dict))}
    if names == {"int", "float"}:
        return "float"
    return " | ".join(sorted(names)) if names else None


def _record(objects: list[dict], name: str, records: Records) -> str:
    keys = list(dict.fromkeys(k for o in objects for k in o))
    # a TypedDict field is a Python name, and one starting __ would be name-mangled
    if not keys or not all(python_name(k) and not k.startswith("__") for k in keys):
        return "dict"  # {} only, or keyed by ids: a mapping, not a record
    body = []
    for key in keys:
        annotation = _type_of([o.get(key) for o in objects], key, records) or "str"
        if any(o.get(key) is None and key in o for o in objects):
            annotation += " | None"
        body.append(f"    {key}: NotRequired[{annotation}]" if any(key not in o for o in objects)
                    else f"    {key}: {annotation}")
    return records.add(_camel(name, item=True), body)


def signature(tool: str, calls: list[dict[str, Any]], records: Records) -> list[tuple[str, str, Any]]:
    """(argument, annotation, example) for each argument the gold calls pass, the required ones
    first, in first-seen order; an argument some call leaves out or passes as null becomes
    `X | None = None`. Object types go into `records`."""
    names = list(dict.fromkeys(k for args in calls for k in args))
    params = []
    for name in names:
        if not python_name(name):
            raise InputError(f"tool {tool}: argument {name!r} is not a Python name; write {tool} "
                             "by hand (its schema comes from the function's parameters)")
        values = [args.get(name) for args in calls]
        annotation = _type_of(values, name, records) or "str"
        example = next((v for v in values if v is not None), None)
        if None in values or any(name not in args for args in calls):
            annotation += " | None = None"
        params.append((name, annotation, example))
    # Python wants the optional ones last; the agent passes arguments by name, so order is free
    return sorted(params, key=lambda p: p[1].endswith("= None"))


def inferred_stub(tool: str, calls: list[dict[str, Any]], records: Records) -> str:
    params = signature(tool, calls, records)
    handle = handle_name({p for p, _, _ in params})
    args = "".join(f", {p}: {a}" for p, a, _ in params)
    mark = ("@tool(writes=True)  # guessed from the name; @tool if it only reads"
            if tool.startswith(WRITE_PREFIXES) else "@tool  # guessed from the name; "
            "@tool(writes=True) if it changes the database")
    lines = [mark, f"def {tool}({handle}: Db{args}) -> dict:",
             (f'    """Not written yet: what {tool} does, as the agent should read it '
              f'({len(calls)} gold call{"s" * (len(calls) != 1)}).')]
    if params:
        lines += ["", "    Args:"]
        lines += [f"        {p}: e.g. {docstring_text(_example(e))}." for p, _, e in params]
    aliases, body = not_written(tool, {p for p, _, _ in params} | {handle})
    lines += ['    """', body]
    return "\n".join([*aliases, *lines])


def not_written(tool: str, params: set[str]) -> tuple[list[str], str]:
    """(module-level lines to put before the stub, the line its body raises with). A parameter
    named ToolError or NOT_WRITTEN would hide that name from the body (a TypeError at the call,
    not the "not written yet" error): the body then reaches it through an alias that no parameter
    takes, named with a leading `__`, which no tool name and no class name has."""
    aliases, names = [], []
    for name in ("ToolError", "NOT_WRITTEN"):
        alias = name
        if name in params:
            alias = next(a for a in (f"__{name}{n or ''}" for n in itertools.count()) if a not in params)
            aliases.append(f"{alias} = {name}  # the stub has a parameter named {name}")
        names.append(alias)
    return aliases, f'    raise {names[0]}({names[1]}.format("{tool}"))'


def handle_name(taken: set[str]) -> str:
    """The name of a stub's Db parameter: `db`, unless an argument has that name."""
    return next(h for h in itertools.chain(("db", "database"), (f"_db{n}" for n in itertools.count()))
                if h not in taken)


def _example(value: Any) -> str:
    # json, not orjson: a gold argument may hold a lone surrogate or an integer past 64 bits
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def tool_name_problem(name: Any) -> str | None:
    """Why a tool cannot be a function of the generated tools.py under this name (None: it can)."""
    if not python_name(name):
        return "is not a Python name"
    if name in HEADER_NAMES:
        return f"would replace the name {name} that tools.py imports or defines"
    if name in dir(builtins) or name.startswith("__"):
        return "would replace a Python builtin or special name that tools.py uses"
    return None


def tools_source(domain: str, calls: dict[str, list[dict[str, Any]]]) -> str:
    for name in calls:
        why = tool_name_problem(name)
        if why:
            raise InputError(f"tool name {name!r} {why}; rename the tool in tasks.json")
    records = Records(reserved=tuple(calls))
    stubs = [inferred_stub(name, args, records) for name, args in calls.items()]
    return assemble(domain, records, stubs, INFERRED)


INFERRED = ("Argument types are inferred from the gold calls; the read/write marks are guessed from "
            "the names.")


def assemble(domain: str, records: Records, stubs: list[str], how: str,
             typing_names: set[str] = frozenset()) -> str:
    """tools.py: the header (`how` says where the stubs come from), then the classes, the stubs."""
    header = TOOLS_HEADER.format(domain=domain, how=how,
                                 typing=records.imports(typing_names))
    return header + "\n\n\n".join([*records.sources(), *stubs]) + "\n"


TOOLS_HEADER = '''"""Tools of the {domain} domain, imported from tau2-bench by `grade import tau2`.

Tools are code, so the import does not translate them: each one here is a typed stub that fails
with "not written yet".
{how}
Write each body against the tables of schema.sql (tables.md says where each column comes from in
tau2's db.json) or on the document's entries through DOCS, raise ToolError with what the agent
should be told, and check each tool that changes the database is marked @tool(writes=True).
`grade validate` names the stubs still to write.
"""

from pathlib import Path
{typing}
from endstate.api import Db, Documents, ToolError, tool

NOW = "2026-01-15T12:00:00"  # db.now, the domain's clock: set the date your policy.md assumes
# what a tool returns reaches the agent as tau2 shows it: a string as it is, anything else as JSON
RESULTS = "tau2"
NOT_WRITTEN = "tool {{}} is not written yet: write its body in the tools.py of domain {domain}"
# seed/db.json an entry at a time, as the nested dict it is there: DOCS.load(db, "users", key),
# change it, DOCS.save(db, "users", key, user) writes back the rows that changed
DOCS = Documents(Path(__file__).parent / "seed" / "mapping.json")


'''

SEED_SOURCE = '''"""Seed of the {domain} domain, imported from tau2-bench by `grade import tau2`:
tau2's database document seed/db.json, flattened into the tables of schema.sql by
seed/mapping.json (the mapping is described in docs/domains.md). Both files are under seed/, so
editing them rebuilds the seed.
"""

import json
import random
import sqlite3
from pathlib import Path

from endstate.api import Mapping, insert_document

DATA = Path(__file__).parent / "seed"


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    mapping = Mapping.from_json((DATA / "mapping.json").read_bytes())
    insert_document(db, json.loads((DATA / "db.json").read_text()), mapping, source="seed/db.json")
'''

CHECKS_SOURCE = '''"""Named checks of the {domain} domain, imported from tau2-bench by
`grade import tau2`."""

import json


def tau2_action(conn, messages, name, arguments, compare_args=None):
    """tau2's ACTION reward: some agent tool call is `name` with these argument values (only the
    `compare_args` ones when given, else every argument the call passes)."""
    for message in messages:
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] != name:
                continue
            args = json.loads(call["function"]["arguments"] or "{{}}")
            keys = set(args) if compare_args is None else set(compare_args)
            if {{k: v for k, v in args.items() if k in keys}} == \\
                    {{k: v for k, v in arguments.items() if k in keys}}:
                return True, f"the agent called {{name}}"
    return False, f"the agent never called {{name}} with {{arguments}}"
'''
