"""travel: the seed's size and determinism, the rules the tools enforce (and the one they must not),
the approval trap graded end to end, and both task suites sound and reproducible."""

import sqlite3
import subprocess
import sys

import orjson
import pytest
from conftest import ROOT

from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader, TaskIndex
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "bench" / "travel.jsonl"
TRAIN = ROOT / "tasks" / "train" / "travel.jsonl"


@pytest.fixture(scope="module")
def travel(domains):
    return domains["travel"]


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


@pytest.fixture(scope="module")
def suite(domains):
    return TaskIndex(domains, [str(BENCH), str(TRAIN)])


def grade_steps(grader, task, steps):
    return grader.grade(replay(grader.domains["travel"], task, steps), task)


def details(graded):
    return {c["id"]: c["detail"] for c in graded["checks"] if not c["passed"]}


# -- the seed -----------------------------------------------------------------------------------

def test_seed_is_realistic_in_size_and_deterministic(travel):
    data, digest = travel.build_seed()
    assert travel.build_seed()[1] == digest == travel.seed()[1]
    db = sqlite3.connect(":memory:")
    db.deserialize(data)
    count = lambda sql: db.execute(sql).fetchone()[0]
    assert count("SELECT COUNT(*) FROM employees") == 1500
    assert count("SELECT COUNT(*) FROM hotels") == 200
    assert count("SELECT COUNT(*) FROM bookings") == 6000
    assert count("SELECT COUNT(*) FROM employees WHERE manager_id IS NULL") == 1  # only the CEO
    # every booking was charged once, and a cancelled one's charges net to its fee; amounts are
    # whole cents, so half a cent separates a REAL sum's rounding from a missing cent
    assert count("SELECT COUNT(*) FROM bookings b WHERE (SELECT COUNT(*) FROM payments p "
                 "WHERE p.booking_id = b.id AND p.kind = 'charge') != 1") == 0
    assert count("SELECT COUNT(*) FROM bookings b WHERE status = 'cancelled' AND abs(cancel_fee - "
                 "(SELECT SUM(CASE kind WHEN 'charge' THEN amount ELSE -amount END) "
                 "FROM payments p WHERE p.booking_id = b.id)) > 0.005") == 0


# -- tool rules ---------------------------------------------------------------------------------

def call(sandbox, tool, **args):
    return orjson.loads(sandbox.call(tool, args).content)


def test_cancellation_fee_applies_inside_the_window(travel, suite):
    with Sandbox(travel, suite.get("travel-cancel-with-fee-accepted")["init"]) as sandbox:
        booking = call(sandbox, "get_booking", booking_id="B900141")
        assert booking["free_cancellation_until"] == "2026-03-01T15:00:00"
        assert booking["cancellation_fee_now"] == 245.0
        assert call(sandbox, "cancel_booking", booking_id="B900141") == {
            "booking_id": "B900141", "status": "cancelled", "cancel_fee": 245.0, "refunded": 245.0,
            "payment_id": "PY900142"}
        assert call(sandbox, "cancel_booking", booking_id="B900141") == {
            "error": "booking B900141 is cancelled"}


def test_tools_refuse_started_stays_sold_out_rooms_and_requests_without_a_manager(travel, suite):
    with Sandbox(travel, suite.get("travel-stay-in-progress-escalate")["init"]) as sandbox:
        assert call(sandbox, "change_dates", booking_id="B900241", check_in="2026-02-28",
                    check_out="2026-03-03") == {
            "error": "the stay of booking B900241 started on 2026-02-28; a stay in progress cannot "
                     "be changed or cancelled here"}
    with Sandbox(travel, suite.get("travel-cheapest-within-cap-search")["init"]) as sandbox:
        assert call(sandbox, "create_booking", employee_id="E9003", booked_by="E9003",
                    hotel_id="H9011", room_type="standard", check_in="2026-03-16",
                    check_out="2026-03-18") == {
            "error": "no standard room is free at H9011 for every night from 2026-03-16 to "
                     "2026-03-18"}
    with Sandbox(travel, suite.get("travel-no-manager-escalate")["init"]) as sandbox:
        assert call(sandbox, "file_approval_request", employee_id="E9008", kind="downgrade",
                    booking_id="B900251", room_type="deluxe", reason="x") == {
            "error": "employee E9008 has no manager to approve requests; escalate to the travel desk"}
        assert sandbox.changes() == {}


def test_change_tools_do_not_look_for_approval(travel, suite):
    """The approval rule lives in policy.md and the checks: the tool makes the change regardless."""
    with Sandbox(travel, suite.get("travel-downgrade-needs-approval-trap")["init"]) as sandbox:
        changed = call(sandbox, "change_room_type", booking_id="B900011", room_type="standard")
        assert changed["total"] == 447.0


# -- the trap, graded ---------------------------------------------------------------------------

def test_downgrade_without_approval_scores_zero_and_names_the_expectation(grader, suite):
    task = suite.get("travel-downgrade-needs-approval-trap")
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    forbidden = task["gold"][:2] + [
        {"tool": "change_room_type", "args": {"booking_id": "B900011", "room_type": "standard"}},
        {"say": "Done, your room is now a standard room."}]
    graded = grade_steps(grader, task, forbidden)
    assert graded["reward"] == 0
    failed = details(graded)
    assert failed["booking-untouched"] == (
        "bookings[B900011].room_type: expected 'deluxe', got 'standard'; "
        "bookings[B900011].total: expected 597.0 ± 0.005, got 447.0")
    assert failed["no-new-payment"] == (
        "payments where booking_id='B900011': expected 1 row(s), got 2")
    assert failed["request-filed"] == (
        "approval_requests where booking_id='B900011', kind='downgrade': expected one row, "
        "found no row")
    # filing the request as well does not make the forbidden change acceptable
    both = task["gold"][:4] + forbidden[2:3]
    assert details(grade_steps(grader, task, both))["booking-untouched"].startswith(
        "bookings[B900011].room_type: expected 'deluxe', got 'standard'")


def test_python_check_names_a_room_above_the_cap(grader, suite):
    task = suite.get("travel-cheapest-within-cap-search")
    pricey = task["gold"][:3] + [{"tool": "create_booking", "args": {
        "employee_id": "E9003", "booked_by": "E9003", "hotel_id": "H9013", "room_type": "standard",
        "check_in": "2026-03-16", "check_out": "2026-03-18"}}]
    assert details(grade_steps(grader, task, pricey))["within-cap"] == (
        "bookings[B900192].nightly_rate: 205.0 is above the standard cap of 180.0 in Halifax, "
        "with no approved over_cap request")


# -- the suites ---------------------------------------------------------------------------------

def test_bench_tasks_are_sound(grader, suite):
    bench = [t for t in suite if t["split"] == "bench"]
    assert len(bench) >= 25
    verdicts = [validate_task(grader, t) for t in bench]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


def test_train_file_is_reproduced_by_its_generator(suite):
    generator = ROOT / "tasks" / "templates" / "travel.py"
    out = subprocess.run([sys.executable, str(generator)], capture_output=True, check=True)
    assert out.stdout == TRAIN.read_bytes()
    train = [t for t in suite if t["split"] == "train"]
    assert len(train) >= 100
    assert len({tag for t in train for tag in t["tags"] if tag.startswith("template:")}) >= 4
