"""`grade import tau2`: a folder in tau2-bench's format (tests/fixtures/tau2_mini, written for this
test) becomes a domain folder and task file; once the tool stubs are written, every imported task
is sound. The document -> tables mapping gives the document back, and bad input is named."""

import json
import shutil
import sqlite3

import pytest
from conftest import ROOT, run_tool

from endstate.core.env.domain import Domain
from endstate.core.env.nested import Mapping, MappingError, insert_document, rebuild_document
from endstate.core.errors import InputError
from endstate.grade.authoring.nested_tables import MAX_DEPTH, create_statements, infer_mapping
from endstate.grade.authoring.tau2_stubs import tools_source

FIXTURE = ROOT / "tests" / "fixtures" / "tau2_mini"
TOOLS = ("get_customer_details", "return_bike", "get_bike", "rent_bike")

# What a person writes into the generated tools.py: real bodies against the generated tables.
WRITTEN_TOOLS = '''
from endstate.api import Db, ToolError, tool

NOW = "2024-05-15T12:00:00"


@tool
def get_customer_details(db: Db, customer_id: str) -> dict:
    """A customer's profile, payment methods and rentals.

    Args:
        customer_id: The customer's id, such as "ana_ruiz_1".
    """
    customer = db.one("SELECT * FROM customers WHERE customer_id = ?", customer_id)
    if customer is None:
        raise ToolError(f"customer {customer_id} not found")
    customer["payment_methods"] = db.all(
        "SELECT id, source, brand, last_four, balance FROM customers__payment_methods "
        "WHERE customer_id = ?", customer_id)
    customer["rentals"] = [r["value"] for r in db.all(
        "SELECT value FROM customers__rentals WHERE customer_id = ? ORDER BY position",
        customer_id)]
    return customer


@tool
def get_bike(db: Db, bike_id: str) -> dict:
    """A bike's model, hourly rate and whether it is available.

    Args:
        bike_id: The bike's id, such as "B-01".
    """
    bike = db.one("SELECT bike_id, model, hourly_rate, available FROM bikes WHERE bike_id = ?",
                  bike_id)
    if bike is None:
        raise ToolError(f"bike {bike_id} not found")
    return {**bike, "available": "available" if bike["available"] else "taken"}


@tool(writes=True)
def return_bike(db: Db, rental_id: str) -> dict:
    """End an active rental and make its bike available again.

    Args:
        rental_id: The rental's id, such as "R1001".
    """
    rental = db.one("SELECT * FROM rentals WHERE rental_id = ?", rental_id)
    if rental is None or rental["status"] != "active":
        raise ToolError(f"no active rental {rental_id}")
    db.run("UPDATE rentals SET status = 'returned', returned_at = ? WHERE rental_id = ?",
           db.now, rental_id)
    db.run("UPDATE bikes SET available = 1 WHERE bike_id = ?", rental["bike_id"])
    return {"rental_id": rental_id, "status": "returned"}


@tool(writes=True)
def rent_bike(db: Db, customer_id: str, bike_id: str, hours: int, payment_id: str) -> dict:
    """Rent a bike for some hours, paid up front with one of the customer's payment methods.

    Args:
        customer_id: The customer's id.
        bike_id: The bike's id.
        hours: How many hours.
        payment_id: The id of the customer's payment method.
    """
    if not db.value("SELECT verified FROM customers WHERE customer_id = ?", customer_id):
        raise ToolError(f"customer {customer_id} is not verified")
    bike = db.one("SELECT * FROM bikes WHERE bike_id = ? AND available = 1", bike_id)
    if bike is None:
        raise ToolError(f"bike {bike_id} is not available")
    if db.one("SELECT 1 FROM customers__payment_methods WHERE customer_id = ? AND id = ?",
              customer_id, payment_id) is None:
        raise ToolError(f"payment method {payment_id} is not the customer's")
    last = db.value("SELECT rental_id FROM rentals ORDER BY rental_id DESC LIMIT 1")
    rental_id = f"R{int(last[1:]) + 1}"
    amount = hours * bike["hourly_rate"]
    db.run("INSERT INTO rentals VALUES (?, ?, ?, ?, 'active', NULL)", rental_id, customer_id,
           bike_id, hours)
    db.run("INSERT INTO rentals__charges VALUES (?, 0, ?, ?)", rental_id, payment_id, amount)
    position = db.value("SELECT count(*) FROM customers__rentals WHERE customer_id = ?",
                        customer_id)
    db.run("INSERT INTO customers__rentals VALUES (?, ?, ?)", customer_id, position, rental_id)
    db.run("UPDATE bikes SET available = 0 WHERE bike_id = ?", bike_id)
    return {"rental_id": rental_id, "charged": amount}
'''


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    return out, p.stderr


def validate(out):
    p = run_tool("grade", "validate", "--domains", str(out), str(out / "tasks" / "cyclehire.jsonl"))
    return p, [json.loads(line) for line in p.stdout.splitlines()]


def test_the_import_writes_a_domain_and_its_tasks(imported):
    out, stderr = imported
    written = {p.name for p in out.iterdir()} - {"__pycache__"}  # Python's, where it writes bytecode
    assert written == {"schema.sql", "tables.md", "seed.py", "seed", "tools.py", "policy.md", "checks.py",
                       "tasks"}
    assert (out / "seed" / "db.json").read_bytes() == (FIXTURE / "db.json").read_bytes()
    assert (out / "policy.md").read_text() == (FIXTURE / "policy.md").read_text()
    tasks = {t["id"]: t for t in map(json.loads, (out / "tasks" / "cyclehire.jsonl").open())}
    assert list(tasks) == ["cyclehire-0", "cyclehire-1", "cyclehire-2", "cyclehire-3"]
    # each task's split is the smallest one listing it (tau2 lists "base", all of them, too)
    assert {t["split"] for t in tasks.values()} == {"train", "test"}
    assert tasks["cyclehire-1"]["split"] == "test" and tasks["cyclehire-2"]["split"] == "train"
    assert tasks["cyclehire-2"]["tags"] == ["source:tau2:2"]
    # the reward basis decides the checks: [DB, COMMUNICATE, NL_ASSERTION] here
    assert [c["kind"] for c in tasks["cyclehire-2"]["checks"]] == ["gold_state", "said", "judge"]
    assert tasks["cyclehire-2"]["gold"][-1] == {"say": "16.5"}
    assert tasks["cyclehire-2"]["gold"][1] == {"tool": "rent_bike", "args": {
        "customer_id": "tom_baker_2", "bike_id": "B-03", "hours": 2, "payment_id": "card_1111"}}
    # agent_data (tau2's deep update of the document): a changed row as its key and changed
    # columns, a new one whole
    assert tasks["cyclehire-2"]["init"] == {
        "customers": [{"customer_id": "tom_baker_2", "verified": 1}],
        "customers__payment_methods": [{
            "customer_id": "tom_baker_2", "source": "gift_card", "id": "gift_9", "brand": None,
            "last_four": None, "balance": 10, "_absent": '["brand","last_four"]'}]}
    # task 0's nl_assertions are not in its reward basis, so no judge check grades them
    assert [c["kind"] for c in tasks["cyclehire-0"]["checks"]] == ["gold_state"]
    assert [c["kind"] for c in tasks["cyclehire-3"]["checks"]] == ["said", "python"]
    user = tasks["cyclehire-0"]["user"]
    assert "You are brisk and polite." in user["instruction"]
    assert "Your customer id is ana_ruiz_1. The rental is R1001." in user["instruction"]
    assert user["opening"]
    assert "skipped tau2 task 4: actions the user makes (tap_unlock)" in stderr
    # tau2's description travels as notes; a task its notes call wrong is tagged known-bad
    assert tasks["cyclehire-0"]["notes"] == "purpose: A plain return."
    assert tasks["cyclehire-3"]["tags"] == ["source:tau2:3", "known-bad"]
    assert "skipped tau2 task 5: ENV_ASSERTION" in stderr
    assert "tools are code, so they are not translated" in stderr
    assert "hours: int, payment_id: str" in (out / "tools.py").read_text()


def test_validate_names_every_tool_still_to_write(imported):
    out, _ = imported
    p, verdicts = validate(out)
    assert p.returncode == 1
    assert not any(v["sound"] for v in verdicts)
    for name in TOOLS:
        assert f"tool {name} is not written yet" in p.stderr


def test_an_argument_named_like_the_stub_s_own_names_does_not_break_it(tmp_path):
    """A gold argument named ToolError or NOT_WRITTEN is a parameter of the stub: the stub still
    fails as "not written yet", not with a TypeError from the shadowed name."""
    folder = tmp_path / "src"
    shutil.copytree(FIXTURE, folder)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[0]["evaluation_criteria"]["actions"][0]["arguments"].update(ToolError="x", NOT_WRITTEN="y")
    (folder / "tasks.json").write_text(json.dumps(tasks))
    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(folder), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "ToolError: str | None = None, NOT_WRITTEN: str | None = None" in (out / "tools.py").read_text()
    p, _ = validate(out)
    assert "tool get_customer_details is not written yet" in p.stderr, p.stderr
    assert "TypeError" not in p.stderr


def test_once_the_tools_are_written_every_task_is_sound(imported, tmp_path):
    out = tmp_path / "cyclehire"
    shutil.copytree(imported[0], out)
    (out / "tools.py").write_text(WRITTEN_TOOLS)
    p, verdicts = validate(out)
    assert p.returncode == 0, p.stderr
    assert [(v["task_id"], v["sound"], v["gold_reward"]) for v in verdicts] == [
        (f"cyclehire-{i}", True, 1) for i in range(4)]
    assert verdicts[2]["unverified_checks"] == ["nl-0"]  # judge checks need a judge
    # The tables give the nested document back, the gold's writes included.
    gold_db = tmp_path / "gold.db"
    p = run_tool("grade", "state", "--gold", "--task", "cyclehire-2", "--domains", str(out),
                 "--tasks", str(out / "tasks" / "cyclehire.jsonl"), "-o", str(gold_db))
    assert p.returncode == 0, p.stderr
    mapping = Mapping.from_json((out / "seed" / "mapping.json").read_bytes())
    document = rebuild_document(sqlite3.connect(gold_db), mapping)
    assert document["rentals"]["R1003"] == {
        "rental_id": "R1003", "customer_id": "tom_baker_2", "bike_id": "B-03", "hours": 2,
        "status": "active", "charges": [{"payment_id": "card_1111", "amount": 16.5}],
        "returned_at": None}
    assert document["customers"]["tom_baker_2"]["rentals"] == ["R1003"]
    assert document["customers"]["tom_baker_2"]["verified"] is True
    assert document["customers"]["tom_baker_2"]["payment_methods"]["gift_9"] == {
        "source": "gift_card", "id": "gift_9", "balance": 10.0}


def test_the_seed_gives_the_document_back(imported):
    out, _ = imported
    seed, _ = Domain("cyclehire", out).build_seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    mapping = Mapping.from_json((out / "seed" / "mapping.json").read_bytes())
    assert rebuild_document(conn, mapping) == json.loads((FIXTURE / "db.json").read_text())


AWKWARD = {
    "version": 2,
    "flags": {"beta": True},  # a top-level record: columns of table `document`
    "bikes": [{"model": "X", "rate": 4.5, "log": {"2024-01-01": {"note": "ok"}}, "tags": ["a"]},
              {"model": "Y", "rate": 5, "log": {}, "tags": [], "extra": [1, "two"]},
              {"model": "Z", "rate": None, "log": {}, "tags": ["b", "c"], "extra": None}],
    "users": {"u1": {"name": {"first": "A"}, "pets": []},
              "u2": {"name": {"first": "B", "last": "C"}}},
}


def test_the_mapping_is_reversible_on_awkward_shapes():
    """Absent vs null, records flattened, arrays of scalars, a field of varying shape (JSON text),
    a nested object under an array, top-level scalars, and made-up keys."""
    mapping = Mapping.from_json(infer_mapping(AWKWARD).to_json())
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, AWKWARD, mapping)
    assert rebuild_document(conn, mapping) == AWKWARD
    columns = {t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in mapping.by_name
               if mapping.by_name[t].stored}
    assert columns["document"] == ["position", "version", "flags__beta"]
    assert columns["bikes__log"] == ["bikes_position", "id", "note"]
    # pets is only ever [] here: nothing says what its items would be, so it is JSON text
    assert columns["users"] == ["id", "name__first", "name__last", "pets", "_absent"]
    assert conn.execute("SELECT extra FROM bikes ORDER BY position").fetchall() == [
        (None,), ('[1,"two"]',), (None,)]
    assert conn.execute("SELECT _absent FROM users WHERE id = 'u2'").fetchone() == ('["pets"]',)


def test_key_columns_never_clash_with_fields_or_each_other():
    """Items that use every usual key name (SQLite reads `ID` as `id`), and a container nested under
    one of its own name (its two parent keys would both be `a_id`), still map to distinct columns,
    reversibly."""
    document = {"t": {"x": {"ID": 1, "Key": 2, "_key": 3}},
                "u": [{"position": 1, "_position": 2, "__position": 3}],
                "a": {"k": {"a": {"k2": {"a": {"k3": {"v": 1}}}}}}}
    mapping = infer_mapping(document)
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, document, mapping)
    assert rebuild_document(conn, mapping) == document
    assert mapping.by_name["t"].key == "__key" and mapping.by_name["u"].key == "___position"
    assert mapping.by_name["a__a__a"].key_columns == ["a_id", "parent__a_id", "id"]


CLASHING = {
    # siblings with different key sets, and keys SQLite's column names cannot tell apart (`X`/`x`,
    # a field named `a__b` beside record `a`'s `b`, a field named `_absent`)
    "bikes": [{"X": 1, "x": "one", "a": {"b": 2}, "a__b": 3},
              {"x": "two", "_absent": True, "id": 7},
              {"X": None, "a": {"b": None, "c": [1]}, "note": {"k": {"v": 1}}}],
    "Orders": {"o1": {"n": 1}}, "orders": {"o1": {"N": 2, "n": 3}},
}


def test_keys_sqlite_cannot_tell_apart_get_their_own_columns_and_come_back():
    mapping = Mapping.from_json(infer_mapping(CLASHING).to_json())
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, CLASHING, mapping)
    assert rebuild_document(conn, mapping) == CLASHING
    bikes = mapping.by_name["bikes"]
    assert {leaf.name: leaf.path for leaf in bikes.leaves if leaf.name.lower().startswith(
        ("x", "a__b", "_absent"))} == {"X": ["X"], "x_2": ["x"], "a__b": ["a", "b"],
                                       "a__b_2": ["a__b"], "_absent_2": ["_absent"]}
    assert sorted(t.name for t in mapping.tables) == [
        "Orders", "bikes", "bikes__a__c", "bikes__note", "document", "orders_2"]
    assert mapping.by_name["orders_2"].source == "/orders"


def test_fields_only_some_documents_hold_get_columns_but_no_rows():
    """The shapes (each task's document, the data model's fields) add columns, never rows."""
    document = {"orders": {"o1": {"id": "o1", "status": "open"}}}
    shape = {"orders": {"o2": {"id": "o2", "status": "cancelled", "cancel_reason": "late",
                               "items": [{"sku": "a"}]}},
             "refunds": [{"amount": 1.5}]}
    mapping = infer_mapping(document, shape)
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, document, mapping)
    assert rebuild_document(conn, mapping) == document
    assert [r[1:] for r in conn.execute("PRAGMA table_info(orders)")][:4] == [
        ("id", "TEXT", 1, None, 1), ("status", "TEXT", 0, None, 0),
        ("cancel_reason", "TEXT", 0, None, 0), ("_absent", "TEXT", 0, None, 0)]
    assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (0,)
    assert mapping.by_name["orders"].key_is_field and "orders__items" in mapping.by_name


def test_deep_and_wide_documents_map_or_are_refused_by_name():
    """Each level of nesting adds a key column to every table below it: 32 levels map (fast: the
    column types of a table are read from its parent once), 33 are refused, as is a row wider than
    SQLite's 2000 columns."""
    def nested(levels: int) -> dict:
        document: object = 1
        for _ in range(2 * levels):  # a collection, then its item: one table per two objects
            document = {"k": document}
        return {"t": document}

    document = nested(MAX_DEPTH + 1)
    mapping = infer_mapping(document)
    assert len(mapping.tables[-1].inherited) == MAX_DEPTH
    conn = sqlite3.connect(":memory:")
    conn.executescript(create_statements(mapping))
    insert_document(conn, document, mapping)
    assert rebuild_document(conn, mapping) == document
    with pytest.raises(MappingError, match=f"containers nested more than {MAX_DEPTH} deep"):
        infer_mapping(nested(MAX_DEPTH + 2))
    with pytest.raises(MappingError, match="table t would have 2001 columns, SQLite's limit is 2000"):
        infer_mapping({"t": {"x": {f"f{i}": i for i in range(2000)}}})


def test_a_document_that_no_longer_fits_its_mapping_is_named():
    mapping = infer_mapping(AWKWARD)
    changed = {**AWKWARD, "users": {"u1": {"name": {"first": "A"}, "pets": [], "age": 3}}}
    with pytest.raises(MappingError, match=r"seed/db.json: /users/u1/age: a field the mapping "
                                           r"does not know"):
        insert_document(sqlite3.connect(":memory:"), changed, mapping, source="seed/db.json")
    wrong = {**AWKWARD, "version": "two"}
    with pytest.raises(MappingError, match=r"/version: expected integer, got str"):
        insert_document(sqlite3.connect(":memory:"), wrong, mapping)


def broken(tmp_path, **changes):
    """A copy of the fixture with files replaced (name -> text, or None to delete)."""
    folder = tmp_path / "tau2"
    shutil.copytree(FIXTURE, folder)
    for name, text in changes.items():
        path = folder / name.replace("_json", ".json").replace("_md", ".md")
        path.unlink() if text is None else path.write_text(text)
    return folder


def tasks_with(edit):
    tasks = json.loads((FIXTURE / "tasks.json").read_text())
    edit(tasks)
    return json.dumps(tasks)


@pytest.mark.parametrize("changes, code, message", [
    ({"tasks_json": None}, 5, "tasks.json: not found; a tau2 domain folder holds"),
    ({"db_json": "{\"users\": "}, 4, "db.json: not valid JSON"),
    ({"db_json": "[1, 2]"}, 4, "db.json: the database must be a JSON object"),
    ({"tasks_json": tasks_with(lambda t: t[1]["evaluation_criteria"]["actions"][0].pop("name"))},
     4, "tasks.json: task '1': evaluation_criteria.actions[0]: missing key 'name'"),
    ({"tasks_json": tasks_with(
        lambda t: t[2]["evaluation_criteria"].update(reward_basis=["DB", "VIBES"]))},
     4, "tasks.json: task '2': evaluation_criteria.reward_basis: unknown reward type 'VIBES'"),
    ({"tasks_json": tasks_with(lambda t: t[0]["evaluation_criteria"].update(output_assertions=[]))},
     4, "tasks.json: task '0': evaluation_criteria: unknown key 'output_assertions'"),
    ({"tasks_json": tasks_with(lambda t: t[3].update(user_scenario={"instructions": 7}))},
     4, "tasks.json: task '3': user_scenario.instructions: expected dict or str, got int"),
    ({"split_tasks_json": '{"train": "0"}'}, 4, "split_tasks.json: expected an object of split"),
    ({"db_json": '{"bikes": {"B-01": {"rate": NaN}}}'}, 4, "db.json: not valid JSON: NaN is not"),
    ({"db_json": '{"bikes": {"B-01": {"serial": 18446744073709551616}}}'},
     4, "db.json: /bikes/B-01/serial: 18446744073709551616: SQLite stores 64-bit integers"),
    ({"db_json": '{"bikes": {"B-01": {"log": [1, 9223372036854775808]}}}'},
     4, "db.json: /bikes/B-01/log/1: 9223372036854775808: SQLite stores 64-bit integers"),
    ({"db_json": '{"bikes": {"B-01": {"log": [1, "two", -9223372036854775809]}}}'},
     4, "db.json: /bikes/B-01/log: [1, 'two', -9223372036854775809]: SQLite stores"),
    ({"db_json": '{"sqlite_stat1": {"a": {"b": 1}}}'}, 4, "field 'sqlite_stat1' would be a table"),
    ({"db_json": '{"t": ' + "[" * 5000 + "]" * 5000 + "}"}, 4, "db.json: nested too deep to read"),
    ({"tasks_json": tasks_with(lambda t: t[2]["initial_state"]["initialization_data"].update(
        agent_data=[1]))},
     4, "task '2': initial_state.initialization_data.agent_data: expected dict, got list"),
    ({"tasks_json": tasks_with(lambda t: t[0].update(initial_state="reset"))},
     4, "task '0': initial_state: expected dict, got str"),
])
def test_bad_input_names_the_file_and_key(tmp_path, changes, code, message):
    p = run_tool("grade", "import", "tau2", str(broken(tmp_path, **changes)),
                 "--out", str(tmp_path / "out"))
    assert p.returncode == code, p.stderr
    assert message in p.stderr


def test_the_stubs_are_valid_python_whatever_the_gold_arguments():
    """An argument some call leaves out may come first (Python wants defaults last), arguments may
    be named `db` and `database`, and a tool may not take a name tools.py itself binds."""
    source = tools_source("shop", {"find": [{"db": "x", "database": "y", "when": "now"},
                                            {"db": "z", "database": "w", "limit": 3}]})
    namespace: dict = {"__file__": "tools.py"}  # DOCS reads its mapping when first used
    exec(compile(source, "tools.py", "exec"), namespace)
    parameters = namespace["find"].__endstate_tool__.parameters
    assert list(parameters["properties"]) == ["db", "database", "when", "limit"]
    assert parameters["required"] == ["db", "database"]
    with pytest.raises(InputError, match="tool name 'tool' would replace the name tool that tools.py"):
        tools_source("shop", {"tool": [{}]})


def test_object_arguments_become_typeddicts_so_the_agent_sees_their_fields():
    """tau2's airline passes passengers and payments as lists of objects: each shape becomes one
    TypedDict (a key some object lacks is NotRequired), shared by the tools that pass it, and a
    class name never replaces one tools.py imports."""
    flight = {"flight_number": "HAT1", "date": "2024-05-01"}
    source = tools_source("air", {
        "book_reservation": [{"passengers": [{"first_name": "A", "dob": "1990-01-01"},
                                             {"first_name": "C", "dob": None}, {"first_name": "E"}],
                              "flights": [flight], "db": {"x": 1}, "by_id": {"1": 2},
                              "hidden": {"__key": 1}, "none": {"a": 1}, "_1": [{"b": 2}],
                              "exceptions": [{"c": 3}]}],
        "update_reservation_flights": [{"flights": [flight]}, {"flights": []}],
        "Flight": [{}]})  # a tool named like the class
    namespace: dict = {"__file__": "tools.py"}  # DOCS reads its mapping when first used
    exec(compile(source, "tools.py", "exec"), namespace)
    book = namespace["book_reservation"].__endstate_tool__.parameters["properties"]
    assert book["passengers"]["items"] == {
        "type": "object", "required": ["first_name"], "additionalProperties": False,
        "properties": {"first_name": {"type": "string"},
                       "dob": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    assert book["db"]["properties"] == {"x": {"type": "integer"}}  # the class is Db2, not Db
    assert book["by_id"] == {"type": "object", "description": 'e.g. {"1":2}.'}  # keyed by ids
    update = namespace["update_reservation_flights"].__endstate_tool__.parameters["properties"]
    assert update["flights"]["items"] == book["flights"]["items"]
    assert book["hidden"]["type"] == "object" and "properties" not in book["hidden"]  # __ mangles
    assert source.count("class Flight2(TypedDict)") == 1 and "class Db2(TypedDict)" in source
    # names that are not classes Python can define, or would hide a builtin
    assert {"class RecordNone(", "class Record1(", "class Exception2("} <= set(
        line[:line.index("(") + 1] for line in source.splitlines() if line.startswith("class "))


def test_an_existing_folder_is_not_overwritten_without_force(imported, tmp_path):
    out = tmp_path / "cyclehire"
    shutil.copytree(imported[0], out)
    (out / "tools.py").write_text(WRITTEN_TOOLS)
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out))
    assert p.returncode == 2 and "pass --force" in p.stderr
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out), "--force")
    assert p.returncode == 0, p.stderr
    assert (out / "tools.py").read_text() == WRITTEN_TOOLS  # the hand-written tools survive
    assert "kept" in p.stderr


def test_a_task_an_idle_agent_passes_is_flagged(tmp_path):
    idle = {"id": "idle", "user_scenario": {"instructions": "Ask about nothing."},
            "evaluation_criteria": {"actions": [], "communicate_info": []}}
    folder = broken(tmp_path, tasks_json=tasks_with(lambda t: t.append(idle)))
    p = run_tool("grade", "import", "tau2", str(folder), "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert "1 task(s) pass an agent that does nothing" in p.stderr and "tau2 id(s) idle" in p.stderr


def test_a_toml_database_is_imported_as_json(tmp_path):
    folder = tmp_path / "tau2"
    folder.mkdir()
    (folder / "db.toml").write_text(
        '[lines.L1]\nline_id = "L1"\nactive = true\nsince = 2024-01-02\n'
        '[[lines.L1.usage]]\nmonth = "2024-04"\ngb = 3.5\n')
    (folder / "policy.md").write_text("Help with phone lines.\n")
    (folder / "tasks.json").write_text(json.dumps([{
        "id": "t", "user_scenario": {"instructions": "Suspend line L1."},
        "evaluation_criteria": {"actions": [{"action_id": "a", "name": "suspend_line",
                                             "arguments": {"line_id": "L1"}}],
                                "reward_basis": ["DB"]}}]))
    out = tmp_path / "phones"
    p = run_tool("grade", "import", "tau2", str(folder), "--out", str(out))
    assert p.returncode == 0, p.stderr
    document = json.loads((out / "seed" / "db.json").read_text())
    assert document == {"lines": {"L1": {"line_id": "L1", "active": True, "since": "2024-01-02",
                                         "usage": [{"month": "2024-04", "gb": 3.5}]}}}
    assert "@tool(writes=True)" in (out / "tools.py").read_text()  # suspend_ reads as a write
    seed, _ = Domain("phones", out).build_seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    mapping = Mapping.from_json((out / "seed" / "mapping.json").read_bytes())
    assert rebuild_document(conn, mapping) == document
    assert conn.execute("SELECT since FROM lines").fetchone() == ("2024-01-02",)  # text, not '"..."'
