"""What `grade import tau2` and `grade new-domain` generate from data (SQL in schema.sql, Python in
tools.py, seed.py and checks.py) has a structure no input byte can change: names are quoted and
checked, no data stands in a comment, and the result is loaded before the command succeeds,
written whole or not at all. The property test feeds hostile names through both and loads what
they write."""

import json
import keyword
import shutil
import sqlite3

import pytest
from conftest import ROOT, run_tool
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from endstate.core.env.domain import Domain
from endstate.core.env.nested import Mapping, rebuild_document
from endstate.core.errors import EndstateError
from endstate.grade.authoring.scaffold import new_domain
from endstate.grade.authoring.tau2_source import Source
from endstate.grade.authoring.tau2_write import write_domain

FIXTURE = ROOT / "tests" / "fixtures" / "tau2_mini"


def fixture_with(tmp_path, db=None, tasks=None):
    folder = tmp_path / "tau2"
    shutil.copytree(FIXTURE, folder)
    if db is not None:
        document = json.loads((folder / "db.json").read_text())
        db(document)
        (folder / "db.json").write_text(json.dumps(document))
    if tasks is not None:
        records = json.loads((folder / "tasks.json").read_text())
        tasks(records)
        (folder / "tasks.json").write_text(json.dumps(records))
    return folder


@pytest.mark.parametrize("where", ["collection", "field"])
def test_a_key_cannot_inject_sql_into_the_generated_schema(tmp_path, where):
    """A newline in a key once escaped a `--` comment of schema.sql: the ATTACH ran at the import
    and again at every seed build. Now no key reaches a comment, and a name SQL cannot hold
    plainly is refused, naming the field; nothing is written."""
    pwned = tmp_path / "pwned.db"
    key = f"x\nATTACH DATABASE '{pwned}' AS pwn;\n--"

    def inject(document):
        if where == "collection":
            document[key] = {"a": {"v": 1}}
        else:
            document["bikes"]["B-01"][key] = 1

    out = tmp_path / "out" / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(fixture_with(tmp_path, db=inject)), "--out", str(out))
    assert not pwned.exists(), "the injected statement ran"
    assert p.returncode == 4, p.stderr
    assert "has the character U+000A" in p.stderr and "rename it" in p.stderr
    assert not out.exists()


def test_no_data_stands_in_a_comment_of_schema_sql(tmp_path):
    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out))
    assert p.returncode == 0, p.stderr
    comments = [line for line in (out / "schema.sql").read_text().splitlines() if "--" in line]
    document = json.loads((FIXTURE / "db.json").read_text())
    fields = {k for v in document.values() if isinstance(v, dict) for item in v.values()
              if isinstance(item, dict) for k in item}
    assert comments and not [c for c in comments if any(f in c for f in fields | set(document))]
    assert "`/customers/*/email`" in (out / "tables.md").read_text()  # where columns come from


@pytest.mark.parametrize("tool, args", [
    ("str", {"text": "a"}),  # a stub named like a builtin hid it from every annotation after it
    ("get_note", {"note": "a" * 53 + "\u0001"}),  # its example was cut inside "\u0001"
    ("get_note", {"note": "\u00e9" * 20 + "\\" * 40 + '"""' + "\u0001" * 9}),
    ("get_note", {"note": '"' * 80}),
])
def test_the_generated_tools_load_whatever_the_gold_calls(tmp_path, tool, args):
    """Before, exit 0 then a tools.py that did not load: a tool named like a builtin, or a gold
    argument whose example was cut inside an escape sequence of its docstring."""
    def add(tasks):
        tasks[0]["evaluation_criteria"]["actions"].append(
            {"action_id": "x", "name": tool, "arguments": args})

    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(fixture_with(tmp_path, tasks=add)), "--out", str(out))
    if p.returncode == 4:  # refused, by name, with nothing written
        assert f"tool name {tool!r}" in p.stderr and not out.exists()
        return
    assert p.returncode == 0, p.stderr
    tools = Domain("cyclehire", out).tools  # loads, and every stub has its schema
    doc = tools[tool].schema["function"]["parameters"]["properties"]
    assert list(doc) == list(args)


def test_a_failed_import_leaves_nothing_behind(tmp_path):
    """A tool name that is no Python name was refused after schema.sql and the seed were written,
    leaving a half-written folder; now every refusal comes before the first write."""
    def add(tasks):
        tasks[0]["evaluation_criteria"]["actions"].append(
            {"action_id": "x", "name": "not-a-name", "arguments": {}})

    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(fixture_with(tmp_path, tasks=add)), "--out", str(out))
    assert p.returncode == 4 and "tool name 'not-a-name' is not a Python name" in p.stderr
    assert not out.exists() and not list(tmp_path.glob(".cyclehire*"))


def test_a_forced_reimport_replaces_the_folder_whole_and_keeps_the_users_code(tmp_path):
    out = tmp_path / "cyclehire"
    assert run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out)).returncode == 0
    (out / "tools.py").write_text("# mine\n")
    (out / "notes.txt").write_text("mine too\n")
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out), "--force")
    assert p.returncode == 0, p.stderr
    assert (out / "tools.py").read_text() == "# mine\n" and (out / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cyclehire"]


@pytest.mark.parametrize("command", [["new-domain", "retail"], ["import", "tau2", str(FIXTURE)]])
def test_a_builtin_domains_name_is_refused(tmp_path, command):
    """`grade new-domain retail` wrote a folder every later command refused (two domains named
    retail); now the name is refused up front."""
    args = ["--out", str(tmp_path / "retail")] if command[0] == "import" else ["--out", str(tmp_path)]
    p = run_tool("grade", *command, *args)
    assert p.returncode == 2
    assert "domain name 'retail' is a built-in domain's" in p.stderr
    assert not any(tmp_path.iterdir())


# -- the property: hostile names through the importer and the scaffold ------------------------

# Names that must be refused by name or survive whole, and names that must survive: SQL and
# Python keywords, builtins, non-ASCII identifiers, the names endstate's own code binds.
HOSTILE = st.one_of(
    st.sampled_from(["\n", "x\nATTACH DATABASE 'PWNED' AS p;--", "*/", "/*", "--", "'", '"', "\\",
                     "\x00", "\u2028", "\ud800", "`", "${x}", "{x}", "%s", "a b", "ﬁle", "Ⅸ",
                     "__builtins__", "__name__", "sqlite_x", "_endstate_x", "", *keyword.kwlist]),
    st.text(max_size=12))
TRICKY = st.sampled_from(["select", "order", "group", "table", "key", "value", "position",
                          "document", "_absent", "id", "ID", "Key", "db", "Db", "NOW", "tool",
                          "NotRequired", "match", "print", "list", "str", "dict", "None_",
                          "é", "東京", "𝔡𝔟x", "a" * 5000])
IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
FAIR = st.one_of(TRICKY, IDENT)
NAME = st.one_of(HOSTILE, FAIR)
SLOTS = ("collection", "field", "nested", "record_key", "tool", "argument", "inner", "task_id",
         "instruction", "domain")


@st.composite
def tau2_source(draw):
    """A document and a task with a hostile name in one place (or none), fair names elsewhere."""
    hostile = draw(st.sampled_from([*SLOTS, None]))
    n = {slot: draw(HOSTILE if slot == hostile else FAIR) for slot in SLOTS}
    document = {n["collection"]: {"k1": {n["field"]: 1, "plain": {n["nested"]: "x"}},
                                  "k2": {n["field"]: 2}},
                n["record_key"]: 3}
    value = draw(st.one_of(HOSTILE, st.text(max_size=80)))
    tasks = [{"id": n["task_id"], "user_scenario": {"instructions": n["instruction"]},
              "evaluation_criteria": {"actions": [{"action_id": "a", "name": n["tool"], "arguments": {
                  n["argument"]: value, "obj": {n["inner"]: value}}}], "reward_basis": ["DB"]}}]
    domain = n["domain"] if hostile == "domain" else draw(st.sampled_from(["shop", "a" * 64, "x-y_z9"]))
    return document, tasks, domain


def _loads_whole(out, domain, document):
    built = Domain(domain, out)
    built.tools_module  # the stubs compile and load
    tasks = [json.loads(line) for line in (out / "tasks" / f"{domain}.jsonl").read_bytes().split(b"\n") if line]
    assert tasks and all(t["domain"] == domain for t in tasks)
    seed, _ = built.build_seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    mapping = Mapping.from_json((out / "seed" / "mapping.json").read_bytes())
    assert rebuild_document(conn, mapping) == document


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tau2_source())
def test_hostile_names_are_refused_by_name_or_load_back_whole(tmp_path_factory, example):
    document, tasks, domain = example
    base = tmp_path_factory.mktemp("hostile")
    pwned = base / "PWNED"
    document = json.loads(json.dumps(document).replace("PWNED", str(pwned)))
    parent = base / "out"
    parent.mkdir()
    if "/" in domain or "\x00" in domain or domain in ("", ".", ".."):
        return  # not one folder's name: no domain can be called so
    out = parent / domain
    (base / "db.json").write_text(json.dumps(document))
    source = Source(base, base / "db.json", document, base / "tasks.json", tasks, "policy\n", {})
    try:
        write_domain(source, out)
    except EndstateError as e:
        assert e.exit_code in (2, 4), e.message
        assert not any(parent.iterdir()), "a refused import wrote something"
        event(f"refused: {e.message.split(':')[0][:30]}")
    else:
        _loads_whole(out, domain, document)
        event("written and loaded")
    assert not pwned.exists()


@settings(max_examples=60, deadline=None)
@given(st.one_of(NAME, st.sampled_from(["shop", "a" * 64, "a" * 65, "x-y_z9"])))
def test_hostile_names_through_the_scaffold(tmp_path_factory, name):
    parent = tmp_path_factory.mktemp("scaffold")
    try:
        folder = new_domain(name, parent)
    except EndstateError as e:
        assert e.exit_code == 2 and not any(parent.iterdir())
        return
    assert Domain(name, folder).tools and Domain(name, folder).build_seed()
