"""consulting domain (out of distribution): a deterministic seed of realistic size that keeps the
firm's rules, the hard rules its tools enforce, the staffing, approval-chain and billing rules
(traps) its checks catch with a detail naming the broken rule, an `ood` benchmark with no training
task anywhere in tasks/, and a generator of training candidates that reproduces its output byte
for byte, every task sound."""

import copy
import hashlib
import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import ROOT

from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replay import replay
from endstate.core.grading.grader import Grader, TaskIndex
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "ood" / "consulting.jsonl"
GENERATOR = ROOT / "tasks" / "templates" / "consulting.py"
# sha256 of the generator's output: the candidates are not committed (no training pool may hold an
# out-of-distribution domain's tasks), so this pins them byte for byte instead of a file
TRAIN_SHA256 = "8565415e931417080ed74c3a741193da9e4b0c1173c3ff8344f5180105c1016c"


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def consulting(domains):
    return domains["consulting"]


@pytest.fixture(scope="module")
def suite(domains):
    return TaskIndex(domains, [str(BENCH)])


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


@pytest.fixture(scope="module")
def generated():
    return subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, check=True).stdout


def grade_steps(grader, task, steps):
    return grader.grade(replay(grader.domains["consulting"], task, steps), task)


def failed(graded) -> dict[str, str]:
    return {c["id"]: c["detail"] for c in graded["checks"] if c["passed"] is False}


def with_args(task, tool, **args):
    """The task's gold with the arguments of its (first) call of `tool` changed."""
    gold = copy.deepcopy(task["gold"])
    step = next(s for s in gold if s.get("tool") == tool)
    step["args"].update(args)
    return gold


# -- the seed ------------------------------------------------------------------------------------

def test_seed_is_deterministic_of_realistic_size_and_keeps_the_firms_rules(consulting):
    data, digest = consulting.seed()
    assert consulting.build_seed()[1] == digest
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    count = lambda sql: conn.execute(sql).fetchone()[0]
    assert count("SELECT count(*) FROM employees") == 448 and count("SELECT count(*) FROM clients") == 90
    assert count("SELECT count(*) FROM engagements") == 300
    assert count("SELECT count(*) FROM assignments") > 800
    assert count("SELECT count(*) FROM time_entries") > 10000
    assert count("SELECT count(*) FROM invoice_lines") > 10000
    # nobody is over-booked, only approved time is billed, every large invoice is approved
    assert count("SELECT count(*) FROM assignments a JOIN employees e ON e.id = a.employee_id "
                 "WHERE (SELECT sum(b.hours_per_week) FROM assignments b WHERE b.employee_id = "
                 "a.employee_id AND b.start_date <= a.end_date AND b.end_date >= a.start_date) "
                 "> e.weekly_capacity") == 0
    assert count("SELECT count(*) FROM time_entries WHERE status = 'billed' AND approved_by IS NULL") == 0
    assert count("SELECT count(*) FROM invoices i WHERE amount > 50000 AND NOT EXISTS (SELECT 1 "
                 "FROM approvals a WHERE a.reference = i.id AND a.status = 'approved')") == 0
    assert count("SELECT count(*) FROM engagements e WHERE (SELECT sum(amount) FROM invoices "
                 "WHERE engagement_id = e.id) > e.budget") == 0


# -- hard rules: enforced by the tools -----------------------------------------------------------

def test_tools_refuse_what_the_firms_systems_forbid(consulting, suite):
    task = suite.get("consulting-invoice-only-approved-time-trap")
    entries = {e["status"]: e["id"] for e in task["init"]["time_entries"]}
    eng = task["init"]["engagements"][0]["id"]
    with Sandbox(consulting, task["init"]) as sandbox:
        def error(tool, args):
            return json.loads(sandbox.call(tool, args).content)["error"]
        assert error("approve_time", {"time_entry_ids": [entries["approved"]],
                                      "approver_id": "E9201"}) == \
            f"time entry {entries['approved']} is approved, not submitted"
        assert error("log_time", {"employee_id": "E9203", "engagement_id": eng,
                                  "work_date": "2026-03-17", "hours": 8,
                                  "description": "x"}) == "work_date 2026-03-17 is in the future"
        assert error("create_invoice", {"engagement_id": "EN0001",
                                        "time_entry_ids": [entries["approved"]]}) == \
            f"time entry {entries['approved']} is not on engagement EN0001"
        assert error("issue_invoice", {"invoice_id": "IN00001"}) == \
            "invoice IN00001 is paid, not a draft"
        assert sandbox.changes() == {}


# -- policy-only rules: the tools allow them, the checks catch them --------------------------------

def test_billing_unapproved_time_scores_zero(grader, suite):
    task = suite.get("consulting-invoice-only-approved-time-trap")
    every = sorted(e["id"] for e in task["init"]["time_entries"])
    graded = grade_steps(grader, task, with_args(task, "create_invoice", time_entry_ids=every))
    assert graded["reward"] == 0
    assert failed(graded)["only-approved"] == (
        "2 unapproved time entries billed on EN9201: TE920006, TE920007")


def test_approving_ones_own_time_scores_zero(grader, suite):
    task = suite.get("consulting-manager-cannot-approve-own-time-trap")
    every = sorted(e["id"] for e in task["init"]["time_entries"])
    graded = grade_steps(grader, task, with_args(task, "approve_time", time_entry_ids=every))
    assert graded["reward"] == 0
    assert failed(graded)["approval-chain"] == (
        "time_entries[TE910005] was approved by its own author; E9102 approves E9101's time on "
        "EN9101")


def test_over_booking_or_staffing_over_time_off_scores_zero(grader, suite):
    partial = suite.get("consulting-staff-only-free-hours-trap")
    graded = grade_steps(grader, partial, with_args(partial, "assign_consultant", hours_per_week=24.0))
    assert graded["reward"] == 0
    assert failed(graded)["within-policy"] == (
        "assignments[AS91402]: E9143 is booked 52 h/week over 2026-03-30..2026-05-08, above "
        "their capacity of 40")
    away = suite.get("consulting-staff-around-vacation-trap")
    graded = grade_steps(grader, away, with_args(away, "assign_consultant", start_date="2026-03-30"))
    assert failed(graded)["within-policy"].endswith(  # the seed decides the assignment's number
        "] overlaps E9153's time off 2026-04-06..2026-04-10")


def test_a_discount_without_the_partners_approval_scores_zero(grader, suite):
    task = suite.get("consulting-discount-needs-partner-file-and-staff-at-card")
    graded = grade_steps(grader, task, with_args(task, "assign_consultant", bill_rate=270.0))
    assert graded["reward"] == 0
    assert failed(graded)["within-policy"].endswith(
        "].bill_rate 270.00 is below the card's 310.00 without an approved rate exception")


def test_billing_past_the_budget_or_issuing_unapproved_scores_zero(grader, suite):
    over = suite.get("consulting-invoice-past-budget-change-order-trap")
    entries = [e["id"] for e in over["init"]["time_entries"]]
    graded = grade_steps(grader, over, over["gold"][:3] + [{"tool": "create_invoice", "args": {
        "engagement_id": "EN9221", "time_entry_ids": entries}}])
    assert graded["reward"] == 0
    assert failed(graded)["within-budget"] == (
        "EN9221 has billed 244,900.00, over its budget of 240,000.00")
    large = suite.get("consulting-large-invoice-needs-partner-trap")
    graded = grade_steps(grader, large, large["gold"][:3] + [
        {"tool": "issue_invoice", "args": {"invoice_id": "IN92301"}}])
    assert failed(graded)["still-draft"] == "invoices[IN92301].status: expected 'draft', got 'issued'"


# -- the suites ----------------------------------------------------------------------------------

def test_bench_is_out_of_distribution_and_covers_the_kinds(domains, grader):
    bench = read(BENCH)
    assert len(bench) >= 25 and {t["split"] for t in bench} == {"ood"}
    assert not any(t["domain"] == "consulting" for p in (ROOT / "tasks").glob("*/*.jsonl")
                   if p.parent.name != "ood" for t in read(p))
    tools = domains["consulting"].tools
    writes = [sum(1 for s in t["gold"] if "tool" in s and tools[s["tool"]].writes) for t in bench]
    assert sum("single-call" in t["tags"] for t in bench) >= 3 and max(writes) >= 2
    assert sum("policy-trap" in t["tags"] for t in bench) >= 12
    assert sum(any(c["kind"] == "judge" for c in t["checks"]) for t in bench) >= 2
    verdicts = [validate_task(grader, t) for t in bench]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


def test_generator_is_reproducible_and_every_candidate_is_sound(generated, grader):
    assert hashlib.sha256(generated).hexdigest() == TRAIN_SHA256
    train = [json.loads(line) for line in generated.splitlines()]
    templates = {tag for t in train for tag in t["tags"] if tag.startswith("template:")}
    assert len(train) >= 100 and len(templates) >= 8 and {t["split"] for t in train} == {"train"}
    assert sum("single-call" in t["tags"] for t in train) >= 20
    verdicts = [validate_task(grader, t) for t in train]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


def test_candidates_share_no_id_entity_or_instruction_with_the_bench(generated):
    bench, train = read(BENCH), [json.loads(line) for line in generated.splitlines()]
    ids = lambda t: {r["id"] for rows in t["init"].values() for r in rows if "id" in r}
    assert not {t["id"] for t in bench} & {t["id"] for t in train}
    assert not set().union(*map(ids, bench)) & set().union(*map(ids, train))
    norm = lambda t: " ".join(t["user"]["instruction"].casefold().split())
    assert not {norm(t) for t in bench} & {norm(t) for t in train}
