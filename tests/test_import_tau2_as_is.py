"""`grade import tau2` on a suite as it is published: the task file and policy where tau2's own
suites keep them, the data model read as text for fields no record holds, a re-import that keeps
the user's schema edits, and gold calls that fail in tau2 too marked as such. The fixture is
tests/fixtures/tau2_mini (written for these tests), changed per test in a copy."""

import json
import os
import shutil
import sqlite3
import subprocess

import pytest
from conftest import BIN, run_tool
from test_import_tau2 import FIXTURE, WRITTEN_TOOLS

from endstate.core.env.domain import Domain
from endstate.core.env.nested import Mapping, rebuild_document

# A data model in tau2's style (pydantic classes, an Enum, a Literal alias, the DB class), written
# for this test: refunds and a rental's cancel reason are declared, and no record holds them.
DATA_MODEL = '''
from enum import Enum
from typing import Dict, List, Literal, Optional, Union
from pydantic import BaseModel, Field
from tau2.environment.db import DB

Membership = Literal["gold", "regular"]


class Status(str, Enum):
    ACTIVE = "active"
    RETURNED = "returned"


class Charge(BaseModel):
    payment_id: str
    amount: float


class Rental(BaseModel):
    rental_id: str
    customer_id: str
    bike_id: str
    hours: int
    status: Status
    charges: List[Charge]
    returned_at: Optional[str] = None
    cancel_reason: Optional[Literal["no_longer_needed", "broken_bike"]] = None


class Refund(BaseModel):
    rental_id: str
    amount: float = Field(description="how much")
    approved: bool


class CardPayout(BaseModel):
    source: Literal["card"]
    last_four: str


class VoucherPayout(BaseModel):
    source: Literal["voucher"]
    code: str
    expires: Optional[str] = None


class HireDB(DB):
    currency: str
    late_fee: float
    customers: Dict[str, dict]
    bikes: Dict[str, dict]
    rentals: Dict[str, Rental]
    refunds: List[Refund] = Field(default_factory=list)
    payouts: Dict[str, Union[CardPayout, VoucherPayout]] = Field(default_factory=dict)
    tier: Membership = "regular"
'''


def grade(*args):
    return run_tool("grade", *map(str, args))


def copy_fixture(tmp_path, name="tau2"):
    folder = tmp_path / name
    shutil.copytree(FIXTURE, folder)
    return folder


def columns(out, table):
    conn = sqlite3.connect(":memory:")
    conn.executescript((out / "schema.sql").read_text())
    return {r[1]: r[2] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def test_the_data_model_gives_declared_fields_typed_columns_and_the_seed_stays_exact(tmp_path):
    model = tmp_path / "data_model.py"
    model.write_text(DATA_MODEL)
    out = tmp_path / "hire"
    p = grade("import", "tau2", FIXTURE, "--out", out, "--data-model", model)
    assert p.returncode == 0, p.stderr
    assert "field(s) the data model declares and no record holds got a column" in p.stderr
    assert "/rentals/*/cancel_reason" in p.stderr and "/refunds" in p.stderr
    assert columns(out, "rentals")["cancel_reason"] == "TEXT"
    assert columns(out, "refunds") == {"position": "INTEGER", "rental_id": "TEXT",
                                      "amount": "REAL", "approved": "INTEGER"}
    assert columns(out, "document")["tier"] == "TEXT"
    # a union of models: each variant's fields (a card's last four, a voucher's code)
    assert columns(out, "payouts") == {"id": "TEXT", "source": "TEXT", "last_four": "TEXT",
                                      "code": "TEXT", "expires": "TEXT"}
    # the document comes back exactly: no refunds, no cancel reasons, no tier
    seed, _ = Domain("hire", out).build_seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    mapping = Mapping.from_json((out / "seed" / "mapping.json").read_bytes())
    assert rebuild_document(conn, mapping) == json.loads((FIXTURE / "db.json").read_text())


def test_without_the_data_model_the_import_says_what_it_could_not_see(tmp_path):
    folder = copy_fixture(tmp_path)
    p = grade("import", "tau2", folder, "--out", tmp_path / "plain")
    assert "no --data-model: a field the domain declares but no record holds gets no column" in p.stderr
    (folder / "src").mkdir()
    (folder / "src" / "data_model.py").write_text(DATA_MODEL)  # where shared suites keep it
    p = grade("import", "tau2", folder, "--out", tmp_path / "found")
    assert p.returncode == 0, p.stderr
    assert "declares 11 field(s) no record holds, which got no column" in p.stderr
    assert f"pass --data-model {folder / 'src' / 'data_model.py'}" in p.stderr
    assert "cancel_reason" not in columns(tmp_path / "found", "rentals")


def test_a_data_model_that_is_not_python_or_has_no_db_class_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    for text, message in (("class (:\n", "not Python that can be read"),
                          ("class A(BaseModel):\n    x: int\n", "expected one class based on "
                           "tau2's DB (the database), found none"),
                          ("import os\nos.system('touch pwned')\nclass D(DB):\n    x: int\n", None),
                          # a forward reference that does not parse (a NUL: ValueError before
                          # Python 3.11.4, SyntaxError since) is a field of unknown type
                          ('class D(DB):\n    x: "Row\\x00"\n', None)):
        bad.write_text(text)
        p = grade("import", "tau2", FIXTURE, "--out", tmp_path / "x", "--force", "--data-model", bad)
        if message:
            assert p.returncode == 4 and message in p.stderr, p.stderr
        else:  # read, never run
            assert p.returncode == 0, p.stderr
            assert not (tmp_path / "pwned").exists() and not (FIXTURE / "pwned").exists()


def test_a_field_sqlite_reserves_is_blamed_on_the_file_that_declares_it(tmp_path):
    """db.json holds no such field: the data model declares it, and the error says so."""
    model = tmp_path / "data_model.py"
    model.write_text(DATA_MODEL.replace("    tier: Membership", "    sqlite_master: List[Refund] = "
                                        "Field(default_factory=list)\n    tier: Membership"))
    p = grade("import", "tau2", FIXTURE, "--out", tmp_path / "x", "--data-model", model)
    assert p.returncode == 4, p.stderr
    assert f"{model}: field 'sqlite_master' would be a table named so" in p.stderr, p.stderr
    assert "db.json" not in p.stderr


@pytest.mark.parametrize("flag", ["--data-model", "--tools-from"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_given_as_a_source_file_is_refused_at_once(tmp_path, flag, kind):
    """Read bounded by the bytes that came, regular files only: a FIFO does not block the import,
    /dev/zero (whose reported size is 0) is not read to the end of memory."""
    source = tmp_path / "src.py"
    if kind == "fifo":
        os.mkfifo(source)
    else:
        source.symlink_to("/dev/zero")
    p = subprocess.run([str(BIN / "grade"), "import", "tau2", str(FIXTURE), "--out", str(tmp_path / "x"),
                        flag, str(source)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 5, p.stderr
    what = "a FIFO" if kind == "fifo" else "a device"
    assert f"{source}: cannot read" in p.stderr and f"{what}, not a regular file" in p.stderr, p.stderr


def test_a_suite_laid_out_like_telecom_and_banking_knowledge_imports(tmp_path):
    """telecom ships tasks_small.json and main_policy.md; banking_knowledge has no policy file."""
    folder = copy_fixture(tmp_path)
    (folder / "tasks.json").rename(folder / "tasks_small.json")
    (folder / "policy.md").unlink()
    p = grade("import", "tau2", folder, "--out", tmp_path / "a")
    assert p.returncode == 0, p.stderr
    assert "no policy.md (nor main_policy.md): the agent gets no policy; pass --policy FILE" in p.stderr
    assert len((tmp_path / "a" / "tasks" / "a.jsonl").read_text().splitlines()) == 4
    shutil.copy(folder / "tasks_small.json", folder / "tasks_full.json")
    p = grade("import", "tau2", folder, "--out", tmp_path / "b")
    assert p.returncode == 4 and "pass --tasks FILE to choose one" in p.stderr
    p = grade("import", "tau2", folder, "--out", tmp_path / "b", "--tasks",
              folder / "tasks_full.json", "--policy", FIXTURE / "policy.md")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "b" / "policy.md").read_text() == (FIXTURE / "policy.md").read_text()


def test_a_re_import_keeps_schema_edits_and_adds_what_the_data_now_needs(tmp_path):
    folder = copy_fixture(tmp_path)
    out = tmp_path / "hire"
    assert grade("import", "tau2", folder, "--out", out).returncode == 0
    schema = (out / "schema.sql").read_text().replace(
        '  "model" TEXT,', '  "model" TEXT,\n  "colour" TEXT DEFAULT \'red\',')
    (out / "schema.sql").write_text(schema + "\nCREATE INDEX bikes_by_model ON bikes (model);\n")
    db = json.loads((folder / "db.json").read_text())
    db["bikes"]["B-02"]["gears"] = 21  # the data now has a field, and a collection
    db["stations"] = {"S1": {"name": "Central"}}
    (folder / "db.json").write_text(json.dumps(db))
    p = grade("import", "tau2", folder, "--out", out, "--force")
    assert p.returncode == 0, p.stderr
    assert "kept your edits to schema.sql and added what the data now needs: column " \
           "bikes.gears, column bikes._absent, table stations" in p.stderr
    merged = (out / "schema.sql").read_text()
    assert merged.startswith(schema) and "bikes_by_model" in merged
    assert columns(out, "bikes")["colour"] == "TEXT" and "gears" in columns(out, "bikes")
    seed, _ = Domain("hire", out).build_seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(seed)
    assert conn.execute("SELECT colour, gears FROM bikes WHERE bike_id = 'B-02'").fetchone() == (
        "red", 21)
    # a schema that lost a key column the data needs is refused, and the folder left as it was
    (out / "schema.sql").write_text(merged.replace('"bike_id" TEXT NOT NULL', '"bike" TEXT NOT NULL', 1)
                                    .replace('PRIMARY KEY ("bike_id")', 'PRIMARY KEY ("bike")', 1))
    before = (out / "schema.sql").read_text()
    p = grade("import", "tau2", folder, "--out", out, "--force")
    assert p.returncode != 0 and "table bikes lacks key column(s) bike_id" in p.stderr
    assert (out / "schema.sql").read_text() == before


def test_gold_calls_that_fail_are_marked_once_the_tools_are_written(tmp_path):
    folder = copy_fixture(tmp_path)
    tasks = json.loads((folder / "tasks.json").read_text())
    # task 1's gold returns R1002 (already returned: the tool refuses) before the real return
    tasks[1]["evaluation_criteria"]["actions"].insert(
        0, {"action_id": "1_x", "name": "return_bike", "arguments": {"rental_id": "R1002"}})
    (folder / "tasks.json").write_text(json.dumps(tasks))
    out = tmp_path / "cyclehire"
    assert grade("import", "tau2", folder, "--out", out).returncode == 0
    p = grade("validate", "--domains", out, out / "tasks" / "cyclehire.jsonl")
    assert "is not written yet" in p.stdout
    p = grade("import", "tau2", folder, "--out", out, "--force")  # stubs: nothing to mark yet
    assert "task(s) call a tool not written yet, so their failing calls are not marked" in p.stderr
    (out / "tools.py").write_text(WRITTEN_TOOLS)
    p = grade("import", "tau2", folder, "--out", out, "--force")
    assert "marked 1 gold call(s) that fail" in p.stderr, p.stderr
    task = next(t for t in map(json.loads, (out / "tasks" / "cyclehire.jsonl").open())
                if t["id"] == "cyclehire-1")
    assert task["gold"][0] == {"tool": "return_bike", "args": {"rental_id": "R1002"}, "fails": True}
    assert "fails" not in task["gold"][1]
    p = grade("validate", "--domains", out, out / "tasks" / "cyclehire.jsonl")
    verdict = next(v for v in map(json.loads, p.stdout.splitlines()) if v["task_id"] == "cyclehire-1")
    assert verdict["sound"], verdict["problems"]


def test_a_task_whose_user_has_tools_is_tagged_and_cited_documents_are_named(tmp_path):
    """banking_knowledge: the user may act through their own tools (tagged: endstate's users have
    none), and tasks cite documents of a knowledge base the folder does not hold."""
    folder = copy_fixture(tmp_path)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[0]["user_tools"] = ["apply_for_card"]
    tasks[1]["required_documents"] = ["doc_fees_001"]
    (folder / "tasks.json").write_text(json.dumps(tasks))
    p = grade("import", "tau2", folder, "--out", tmp_path / "hire")
    assert p.returncode == 0, p.stderr
    task = json.loads((tmp_path / "hire" / "tasks" / "hire.jsonl").read_text().splitlines()[0])
    assert task["tags"] == ["source:tau2:0", "tau2:user-tools"]
    assert "1 task(s) cite required_documents, tau2's knowledge base" in p.stderr


def test_an_import_whose_tables_would_not_give_the_document_back_writes_nothing(tmp_path,
                                                                                monkeypatch):
    """Every import rebuilds the document from the seeded tables and compares: a mapping bug
    (simulated here) is an internal error before anything is written, not a silent loss."""
    import pytest

    from endstate.core.errors import EndstateError, ExitCode
    from endstate.grade.authoring import tau2_write
    from endstate.grade.authoring.tau2_source import read_source

    monkeypatch.setattr(tau2_write, "rebuild_document", lambda conn, mapping: {"lost": True})
    with pytest.raises(EndstateError) as e:
        tau2_write.write_domain(read_source(FIXTURE), tmp_path / "hire")
    assert e.value.exit_code == ExitCode.INTERNAL and "do not give the document back" in e.value.message
    assert not (tmp_path / "hire").exists()
