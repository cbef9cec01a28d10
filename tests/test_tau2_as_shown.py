"""tau2 as tau2 shows it: an imported domain's tool results reach the agent as tau2's environment
renders them (a string as text, the rest as Python's json writes it), on every public tau2-bench
domain of ../shared/tau2 with tools ported the way docs/authoring.md says; tau2's per-task
`issues` become tags, notes and an import warning; `_absent` reads as the fields a record lacks."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import date

import pytest
from conftest import ROOT, run_tool
from test_import_tau2 import FIXTURE, WRITTEN_TOOLS

from endstate.core.env.domain import Domains
from endstate.core.env.nested import readable_row
from endstate.core.env.results import as_json, as_tau2
from endstate.core.env.sandbox import Sandbox
from endstate.core.errors import EndstateError


@dataclass
class Charge:
    payment_id: str
    amount: float


# What tau2's Environment.to_json_str gives for each value, worked out by hand from its code: a
# str is returned as it is; anything else goes through json.dumps after ints, floats and bools
# outside a data-model object become str() and dates their isoformat.
RENDERED = [
    ("yusuf_rossi_9620", "yusuf_rossi_9620"),
    ("4.0", "4.0"),
    ('[{"user_id": "123"}]', '[{"user_id": "123"}]'),  # JSON text a tool wrote: not quoted again
    ("", ""),
    (4.0, '"4.0"'),
    (3, '"3"'),
    (True, '"True"'),
    (None, "null"),
    (["a", 1, 2.5, False, None], '["a", "1", "2.5", "False", null]'),
    ({"name": "Zoë", "balance": 10.5, "tags": [1], "ok": True, "at": None},
     '{"name": "Zo\\u00eb", "balance": 10.5, "tags": [1], "ok": true, "at": null}'),
    ([{"id": "T1", "amount": 2}], '[{"id": "T1", "amount": 2}]'),
    (date(2025, 1, 2), '"2025-01-02"'),
    (Charge("card_1", 16.5), '{"payment_id": "card_1", "amount": 16.5}'),
]


@pytest.mark.parametrize("value, shown", RENDERED)
def test_tau2_results_read_as_tau2_renders_them(value, shown):
    assert as_tau2(value) == shown


def test_the_default_format_is_unchanged_compact_json():
    assert as_json("yusuf_rossi_9620") == '"yusuf_rossi_9620"'
    assert as_json({"a": 1.5, "b": [1, "é"]}) == '{"a":1.5,"b":[1,"é"]}'


def write_domain(folder, results_line: str) -> Domains:
    shutil.copytree(ROOT / "domains" / "retail", folder)
    source = (folder / "tools.py").read_text()
    (folder / "tools.py").write_text(source + f"\n{results_line}\n\n\n@tool\ndef whoami(db: Db) -> str:\n"
                                     '    """The id of the store."""\n    return "store_1"\n')
    return Domains([str(folder)])


def test_a_domain_picks_its_format_in_tools_py(tmp_path):
    shown = {}
    for line in ('RESULTS = "json"', 'RESULTS = "tau2"'):
        domain = write_domain(tmp_path / line.split('"')[1] / "shop", line)["shop"]
        with Sandbox(domain) as sandbox:
            shown[line] = sandbox.call("whoami", {}).content
            assert sandbox.call("whoami", {"x": 1}).content.startswith('{"error":"invalid arguments')
    assert shown == {'RESULTS = "json"': '"store_1"', 'RESULTS = "tau2"': "store_1"}
    domain = write_domain(tmp_path / "odd" / "shop", 'RESULTS = "yaml"')["shop"]
    with pytest.raises(EndstateError, match=r"RESULTS = 'yaml' names no tool result format; use "
                                            r"one of 'json', 'tau2'"):
        Sandbox(domain).call("whoami", {})


# --- the public tau2-bench domains, imported unmodified --------------------------------------------

PUBLIC = next((p / "shared" / "tau2" for p in ROOT.parents if (p / "shared" / "tau2" / "COMMIT").is_file()),
              None)
SOURCES = {"mock": "tools.py", "telecom": "tools.py", "banking_knowledge": "tools.py:KnowledgeTools"}

def body(*lines: str) -> str:
    """Lines of a function body, indented as the stub's `raise` they replace."""
    return "\n    ".join(lines)


# Bodies for some of each domain's stubs, as a person writes them (docs/authoring.md, section 7):
# tool -> the lines that replace `raise ToolError(NOT_WRITTEN.format("TOOL"))`.
PORTS = {
    "mock": {
        "get_users": 'return list(DOCS.load_all(db, "users").values())',
        "transfer_to_human_agents": 'return "Transfer successful"',
        "create_task": body(
            'user = DOCS.load(db, "users", user_id)',
            'if user is None:', '    raise ToolError(f"User {user_id} not found")',
            'task_id = f"task_{db.value(\'SELECT count(*) FROM tasks\') + 1}"',
            'task = {"task_id": task_id, "title": title, "description": description, "status": "pending"}',
            'DOCS.save(db, "tasks", task_id, task)',
            'user["tasks"].append(task_id)', 'DOCS.save(db, "users", user_id, user)', 'return task'),
    },
    "telecom": {
        "get_details_by_id": body(
            ('plan = db.one("SELECT plan_id, name, data_limit_gb, price_per_month, '
             'data_refueling_price_per_gb FROM plans WHERE plan_id = ?", id)'),
            'if plan is None:', '    raise ToolError(f"Unknown ID format or type: {id}")', 'return plan'),
        "transfer_to_human_agents": 'return "Transfer successful"',
    },
    "banking_knowledge": {
        "get_user_information_by_id": 'return json.dumps([DOCS.load(db, "users__data", user_id)], indent=2)',
        "get_current_time": 'return "The current time is 2025-11-14 03:40:00 EST."',
    },
}


def calls(name: str, document: dict) -> list[tuple[str, dict, str]]:
    """(tool, arguments, what tau2 shows) for each ported tool, from the domain's own db."""
    if name == "mock":
        user = document["users"]["user_1"]
        return [("get_users", {}, json.dumps([user])),
                ("transfer_to_human_agents", {"summary": "wants a person"}, "Transfer successful"),
                ("create_task", {"user_id": "user_1", "title": "Call back", "description": "Zoë"},
                 ('{"task_id": "task_2", "title": "Call back", "description": "Zo\\u00eb", '
                  '"status": "pending"}'))]
    if name == "telecom":
        plan = document["plans"][0]  # tau2's Plan declares its fields in db.toml's order
        return [("get_details_by_id", {"id": plan["plan_id"]}, json.dumps(plan)),
                ("transfer_to_human_agents", {"summary": "no signal"}, "Transfer successful")]
    user_id, user = next(iter(document["users"]["data"].items()))
    return [("get_user_information_by_id", {"user_id": user_id}, json.dumps([user], indent=2)),
            ("get_current_time", {}, "The current time is 2025-11-14 03:40:00 EST.")]


@pytest.mark.skipif(PUBLIC is None, reason="the public tau2-bench domains (../shared/tau2) are not here")
@pytest.mark.parametrize("name", list(SOURCES))
def test_a_public_tau2_domain_shows_tool_results_as_tau2_does(tmp_path, name):
    source = PUBLIC / name
    out = tmp_path / f"t2{name}"
    p = run_tool("grade", "import", "tau2", str(source), "--out", str(out),
                 "--data-model", str(source / "src" / "data_model.py"),
                 "--tools-from", str(source / "src" / SOURCES[name]))
    assert p.returncode == 0, p.stderr
    tools = (out / "tools.py").read_text()
    assert '\nRESULTS = "tau2"\n' in tools
    for tool, body in PORTS[name].items():
        stub = f'raise ToolError(NOT_WRITTEN.format("{tool}"))'
        assert tools.count(stub) == 1, tool
        tools = tools.replace(stub, body)
    (out / "tools.py").write_text("import json\n" + tools)
    document = json.loads((out / "seed" / "db.json").read_text())
    domain = Domains([str(out)])[f"t2{name}"]
    with Sandbox(domain) as sandbox:
        for tool, args, shown in calls(name, document):
            assert sandbox.call(tool, args).content == shown, tool
        unknown = sandbox.call(next(iter(PORTS[name])), {"nope": 1}).content
        assert unknown.startswith('{"error":"invalid arguments'), unknown  # errors keep their form


# --- issues, re-imports, _absent -------------------------------------------------------------------

def test_tau2_issues_become_tags_notes_and_a_warning(tmp_path):
    folder = tmp_path / "tau2"
    shutil.copytree(FIXTURE, folder)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[0]["issues"] = [{"id": "ISS-1", "title": "Gold returns the wrong rental",
                           "description": "R1001\nis the\tone", "status": "open"},
                          {"id": "ISS-2", "title": "Typo in the persona", "status": "resolved",
                           "resolution": "fixed in #12"}]
    tasks[1]["issues"] = [{"id": "ISS-4", "title": "Price rounding", "status": "wont_fix"}]
    tasks[2]["issues"] = [{"id": "ISS-3", "title": "Policy is unclear"}]  # tau2's default: open
    tasks[3]["issues"] = []
    tasks[4]["issues"] = [{"id": "ISS-5", "title": "Needs the user's phone"}]  # a skipped task
    (folder / "tasks.json").write_text(json.dumps(tasks))
    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(folder), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert ("warning: 3 task(s) carry issues tau2's authors recorded (2 open, 1 resolved, 1 "
            "wont_fix): tau2 id(s) 0, 1, 2; each is tagged tau2:issue:STATUS, one with an open issue "
            "also known-bad, and its issues are in its notes: read them before training or reporting "
            "on these tasks (--tag 'tau2:issue:*' selects them)\n") in p.stderr
    got = {t["id"]: t for t in map(json.loads, (out / "tasks" / "cyclehire.jsonl").open())}
    assert got["cyclehire-0"]["tags"] == ["source:tau2:0", "known-bad", "tau2:issue:open",
                                          "tau2:issue:resolved"]
    assert got["cyclehire-0"]["notes"] == (
        "purpose: A plain return.\nissue ISS-1 (open): Gold returns the wrong rental - R1001 is the "
        "one\nissue ISS-2 (resolved): Typo in the persona; resolution: fixed in #12")
    assert got["cyclehire-1"]["tags"] == ["source:tau2:1", "tau2:issue:wont_fix"]  # not known-bad
    assert got["cyclehire-1"]["notes"] == "issue ISS-4 (wont_fix): Price rounding"
    assert got["cyclehire-2"]["tags"] == ["source:tau2:2", "known-bad", "tau2:issue:open"]
    assert got["cyclehire-3"]["tags"] == ["source:tau2:3", "known-bad"]  # its description says so
    listed = run_tool("grade", "tasks", "--domains", str(out), "--tag", "tau2:issue:*",
                      str(out / "tasks" / "cyclehire.jsonl"))
    assert [json.loads(x)["id"] for x in listed.stdout.splitlines()] == [
        "cyclehire-0", "cyclehire-1", "cyclehire-2"]


@pytest.mark.parametrize("issues, message", [
    ({"id": "x"}, "task '0': issues: expected list, got dict"),
    (["x"], "task '0': issues[0]: expected an object, got str"),
    ([{"title": "t"}], "task '0': issues[0]: missing key 'id'"),
    ([{"id": "x", "title": "t", "status": "closed"}],
     "task '0': issues[0].status: expected one of open, resolved, wont_fix, got 'closed'"),
])
def test_malformed_issues_are_named(tmp_path, issues, message):
    folder = tmp_path / "tau2"
    shutil.copytree(FIXTURE, folder)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[0]["issues"] = issues
    (folder / "tasks.json").write_text(json.dumps(tasks))
    p = run_tool("grade", "import", "tau2", str(folder), "--out", str(tmp_path / "cyclehire"))
    assert p.returncode == 4 and message in p.stderr, p.stderr


def test_a_re_import_says_when_kept_tools_do_not_show_results_as_tau2(tmp_path):
    out = tmp_path / "cyclehire"
    assert run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out)).returncode == 0
    (out / "tools.py").write_text(WRITTEN_TOOLS)  # written before tools.py set RESULTS
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out), "--force")
    note = ("note: your tools.py shows tool results to the agent in the format 'json', not as tau2 "
            "does (a string quoted as JSON, say): add the line RESULTS = \"tau2\" to it "
            "(docs/authoring.md, porting a tau2-bench tool)\n")
    assert p.returncode == 0 and note in p.stderr, p.stderr
    (out / "tools.py").write_text(WRITTEN_TOOLS + '\nRESULTS = "tau2"\n')
    p = run_tool("grade", "import", "tau2", str(FIXTURE), "--out", str(out), "--force")
    assert p.returncode == 0 and "RESULTS" not in p.stderr, p.stderr


def test_a_row_reads_as_the_fields_its_record_has():
    inserted = {"customer_id": "c1", "brand": None, "balance": 10.0, "_absent": '["brand"]'}
    assert repr(readable_row(inserted)) == "{'customer_id': 'c1', 'brand': <absent>, 'balance': 10.0}"
    assert readable_row({"id": "c2", "_absent": None}) == {"id": "c2"}
    assert repr(readable_row({"_absent": '["note"]'})) == "{'note': <absent>}"  # an update's columns
    plain = {"id": 1}
    assert readable_row(plain) is plain
