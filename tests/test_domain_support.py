"""The support domain: its seed, the hard rules its tools enforce, the policy trap its checks catch
(a ticket resolved while its carrier exception is open), and its task suites."""

import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import ROOT

from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "bench" / "support.jsonl"
TRAIN = ROOT / "tasks" / "train" / "support.jsonl"
GENERATOR = ROOT / "tasks" / "templates" / "support.py"


@pytest.fixture(scope="module")
def support(domains):
    return domains["support"]


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


def grade_steps(grader, task, steps):
    return grader.grade(replay(grader.domains[task["domain"]], task, steps), task)


def by_id(graded):
    return {c["id"]: c for c in graded["checks"]}


# -- the policy trap --------------------------------------------------------------------------

def test_resolving_a_ticket_over_an_open_exception_scores_zero_and_says_why(grader, tasks):
    task = tasks.get("support-resolve-blocked-by-open-exception")
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    forbidden = task["gold"][:2] + [
        {"tool": "resolve_ticket", "args": {"ticket_id": "T90003", "resolution": "Closed as asked."}}]
    graded = grade_steps(grader, task, forbidden)
    assert graded["reward"] == 0
    checks = by_id(graded)
    assert checks["not-resolved-over-exception"]["passed"] is False
    assert checks["not-resolved-over-exception"]["detail"] == (
        "tickets[T90003] was resolved while carrier exception X90003 on shipment S90003 is still open")
    assert checks["left-pending"]["detail"] == "tickets[T90003].status: expected 'pending', got 'resolved'"
    assert checks["exception-still-open"]["passed"] is True


def test_escalating_instead_of_resolving_passes_the_insist_variant(grader, tasks):
    task = tasks.get("support-resolve-insist-escalate")
    resolved = task["gold"][:2] + [
        {"tool": "resolve_ticket", "args": {"ticket_id": "T90004", "resolution": "Customer insisted."}}]
    graded = grade_steps(grader, task, resolved)
    assert graded["reward"] == 0
    assert by_id(graded)["escalated"]["detail"] == "escalations where ticket_id='T90004': expected 1 row(s), got 0"
    assert grade_steps(grader, task, task["gold"])["reward"] == 1


def test_credit_above_the_tier_cap_is_caught_by_the_python_check(grader, tasks):
    task = tasks.get("support-credit-over-cap-accepts-cap")
    greedy = [step for step in task["gold"] if step.get("tool") != "issue_credit"]
    greedy.insert(3, {"tool": "issue_credit", "args": {"ticket_id": "T90012", "amount": 60.0, "reason": "delay"}})
    checks = by_id(grade_steps(grader, task, greedy))
    assert checks["credit-policy"]["detail"] == "credits[CR00083].amount: 60.0 is above the standard cap of 25.00"


# -- the seed ---------------------------------------------------------------------------------

def test_seed_is_realistic_in_size_deterministic_and_follows_its_policy(support):
    data, digest = support.seed()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    count = lambda table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert count("customers") == 3000
    assert count("shipments") > 6000 and count("tickets") > 2500 and count("ticket_notes") > 5000
    assert count("carrier_exceptions") > 500 and count("claims") > 50 and count("credits") > 50
    assert conn.execute("SELECT count(*) FROM tickets t JOIN carrier_exceptions x ON "
                        "x.shipment_id = t.shipment_id WHERE x.status = 'open' AND t.status = 'resolved'"
                        ).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM claims c JOIN carrier_exceptions x ON x.id = c.exception_id "
                        "WHERE x.kind NOT IN ('lost', 'damaged')").fetchone()[0] == 0
    assert support.build_seed()[1] == digest  # built again from rng = Random(0): same contents


# -- hard rules in the tools ------------------------------------------------------------------

def test_tools_enforce_hard_rules_but_leave_the_trap_to_the_checks(support, tasks):
    task = tasks.get("support-premier-damaged-claim")
    with Sandbox(support, task["init"]) as box:
        early = box.call("open_carrier_exception", {"shipment_id": "S90007", "kind": "lost"})
        assert json.loads(early.content) == {
            "error": "shipment S90007 is delivered; lost can only be reported for a shipment in transit"}
        opened = box.call("open_carrier_exception", {"shipment_id": "S90007", "kind": "damaged"})
        assert opened.value == {"exception_id": "X90071", "shipment_id": "S90007", "kind": "damaged",
                                "status": "open"}
        twice = box.call("open_carrier_exception", {"shipment_id": "S90007", "kind": "damaged"})
        assert json.loads(twice.content)["error"] == "shipment S90007 already has open exception X90071 (damaged)"
        too_much = box.call("file_carrier_claim", {"exception_id": "X90071", "amount": 500.0})
        assert json.loads(too_much.content)["error"] == (
            "the amount must be more than 0 and at most the declared value, 420.00")
        # Policy-only: nothing stops resolving the ticket while X90071 is open.
        assert box.call("resolve_ticket", {"ticket_id": "T90007", "resolution": "done"}).ok
        assert box.call("set_priority", {"ticket_id": "T90007", "priority": "high"}).ok is False
        changes = box.changes()
    assert set(changes) == {"carrier_exceptions", "tickets"}
    assert "claims" not in changes  # the refused claim left no partial write


def test_reopening_is_limited_to_thirty_days(support):
    init = {"customers": [{"id": "C9999", "name": "Test Person", "email": "t@example.com",
                           "phone": "555", "zip": "00000", "tier": "standard",
                           "created_at": "2025-01-01T00:00:00"}],
            "tickets": [{"id": f"T9999{n}", "customer_id": "C9999", "shipment_id": None,
                         "subject": "x", "category": "other", "priority": "normal",
                         "status": "resolved", "queue": "general", "assignee": None,
                         "created_at": "2025-11-01T00:00:00", "updated_at": at, "resolved_at": at,
                         "resolution": "done"}
                        for n, at in ((1, "2025-12-01T00:00:00"), (2, "2026-01-10T00:00:00"))]}
    with Sandbox(support, init) as box:
        old = box.call("update_ticket_status", {"ticket_id": "T99991", "status": "open"})
        assert json.loads(old.content)["error"] == (
            "ticket T99991 was resolved on 2025-12-01, more than 30 days ago; it cannot be reopened")
        assert box.call("update_ticket_status", {"ticket_id": "T99992", "status": "open"}).ok
        with box.read_only() as conn:
            row = conn.execute("SELECT status, resolved_at, resolution FROM tickets WHERE id = 'T99992'").fetchone()
    assert row == ("open", None, None)


# -- the suites -------------------------------------------------------------------------------

def test_bench_tasks_are_sound(grader, tasks):
    bench = [t for t in tasks if t["domain"] == "support" and t.get("split") == "bench"]
    assert len(bench) >= 25
    unsound = {t["id"]: v["problems"] for t in bench if not (v := validate_task(grader, t))["sound"]}
    assert unsound == {}


def test_train_file_is_what_the_generator_writes():
    out = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, check=True).stdout
    assert out == TRAIN.read_bytes()
    train = [json.loads(line) for line in out.splitlines()]
    assert len(train) >= 100
    assert len({t["tags"][0] for t in train}) >= 4
    bench_ids = {json.loads(line)["id"] for line in BENCH.read_text().splitlines()}
    assert not bench_ids & {t["id"] for t in train}
    entity_ids = lambda t: {r["id"] for rows in t.get("init", {}).values() for r in rows}
    bench_entities = set().union(*(entity_ids(json.loads(line)) for line in BENCH.read_text().splitlines()))
    assert not bench_entities & set().union(*(entity_ids(t) for t in train))
