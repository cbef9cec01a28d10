"""consulting domain (out of distribution): a deterministic seed of realistic size that keeps the
firm's rules, the hard rules its tools enforce, the staffing, approval-chain and billing rules
(traps) its checks catch with a detail naming the broken rule. Its benchmark (tasks/ood) and
generator are tested in test_ood_suites.py."""

import copy
import json
import sqlite3

import pytest
from conftest import ROOT, failed_checks, grade_steps

from endstate.core.env.sandbox import Sandbox
from endstate.core.grading.grader import TaskIndex

BENCH = ROOT / "tasks" / "ood" / "consulting.jsonl"


@pytest.fixture(scope="module")
def consulting(domains):
    return domains["consulting"]


@pytest.fixture(scope="module")
def suite(domains):
    return TaskIndex(domains, [str(BENCH)])


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
    assert failed_checks(graded)["only-approved"] == (
        "2 unapproved time entries billed on EN9201: TE920006, TE920007")


def test_approving_ones_own_time_scores_zero(grader, suite):
    task = suite.get("consulting-manager-cannot-approve-own-time-trap")
    every = sorted(e["id"] for e in task["init"]["time_entries"])
    graded = grade_steps(grader, task, with_args(task, "approve_time", time_entry_ids=every))
    assert graded["reward"] == 0
    assert failed_checks(graded)["approval-chain"] == (
        "time_entries[TE910005] was approved by its own author; E9102 approves E9101's time on "
        "EN9101")


def test_over_booking_or_staffing_over_time_off_scores_zero(grader, suite):
    partial = suite.get("consulting-staff-only-free-hours-trap")
    graded = grade_steps(grader, partial, with_args(partial, "assign_consultant", hours_per_week=24.0))
    assert graded["reward"] == 0
    assert failed_checks(graded)["within-policy"] == (
        "assignments[AS91402]: E9143 is booked 52 h/week over 2026-03-30..2026-05-08, above "
        "their capacity of 40")
    away = suite.get("consulting-staff-around-vacation-trap")
    graded = grade_steps(grader, away, with_args(away, "assign_consultant", start_date="2026-03-30"))
    assert failed_checks(graded)["within-policy"].endswith(  # the seed decides the assignment's number
        "] overlaps E9153's time off 2026-04-06..2026-04-10")


def test_a_discount_without_the_partners_approval_scores_zero(grader, suite):
    task = suite.get("consulting-discount-needs-partner-file-and-staff-at-card")
    graded = grade_steps(grader, task, with_args(task, "assign_consultant", bill_rate=270.0))
    assert graded["reward"] == 0
    assert failed_checks(graded)["within-policy"].endswith(
        "].bill_rate 270.00 is below the card's 310.00 without an approved rate exception")


def test_billing_past_the_budget_or_issuing_unapproved_scores_zero(grader, suite):
    over = suite.get("consulting-invoice-past-budget-change-order-trap")
    entries = [e["id"] for e in over["init"]["time_entries"]]
    graded = grade_steps(grader, over, over["gold"][:3] + [{"tool": "create_invoice", "args": {
        "engagement_id": "EN9221", "time_entry_ids": entries}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["within-budget"] == (
        "EN9221 has billed 244,900.00, over its budget of 240,000.00")
    large = suite.get("consulting-large-invoice-needs-partner-trap")
    graded = grade_steps(grader, large, large["gold"][:3] + [
        {"tool": "issue_invoice", "args": {"invoice_id": "IN92301"}}])
    assert failed_checks(graded)["still-draft"] == "invoices[IN92301].status: expected 'draft', got 'issued'"
