"""The unrequested-change guard (core.grading.footprint), part of every task's reward: its rule on
hand-made diffs, then on the built-in domains through the real grader: the gold, then one
unrequested write an optimizer would find, scores 0 with the change named, in every domain (and
scored 1 before: freeing the table in the check lets every other check pass it), while another
correct way (the same calls in another order, a detour that ends where the gold does) still
scores 1."""

import copy

import pytest
from conftest import failed_checks, grade_steps

from endstate.core.grading.footprint import footprint, free_of, guard, unrequested
from endstate.core.grading.grader import FOOTPRINT, guarded

NOTHING_FREE = free_of([])


def updated(key, before, after):
    return {"key": {"id": key}, "before": before, "after": after}


GOLD = {"orders": {"updated": [updated("W1", {"status": "pending", "updated_at": "t0"},
                                       {"status": "cancelled", "updated_at": "t1"})]},
        "refunds": {"inserted": [{"key": {"id": "R1"}, "row": {"id": "R1", "amount": 5.0}}]}}


def test_the_footprint_is_columns_per_updated_row_deleted_rows_and_inserts_per_table():
    fp = footprint({**GOLD, "notes": {"deleted": [{"key": {"id": "N1"}, "row": {"id": "N1"}}]}}, NOTHING_FREE)
    assert fp.updated == {("orders", "W1"): frozenset({"status", "updated_at"})}
    assert fp.deleted == frozenset({("notes", "N1")})
    assert dict(fp.inserted) == {"orders": 0, "refunds": 1, "notes": 0}
    free = footprint(GOLD, free_of(["updated_at", "refunds"]))  # a column anywhere, a whole table
    assert free.updated == {("orders", "W1"): frozenset({"status"})} and free.inserted["refunds"] == 0


def test_only_what_the_gold_leaves_alone_is_unrequested():
    allowed = footprint(GOLD, NOTHING_FREE)
    assert unrequested(GOLD, allowed, NOTHING_FREE) == []
    other_value = {"orders": {"updated": [updated("W1", {"status": "pending"}, {"status": "refunded"})]}}
    assert unrequested(other_value, allowed, NOTHING_FREE) == []  # a value: the checks' to say
    collateral = {"orders": {"updated": [updated("W1", {"status": "pending", "address": "a"},
                                                 {"status": "cancelled", "address": "b"})]}}
    assert unrequested(collateral, allowed, NOTHING_FREE) == [
        "orders[W1] updated: address 'a' → 'b' (the task changes only status, updated_at there)"]
    other_row = {"orders": {"updated": [updated("W2", {"status": "pending"}, {"status": "cancelled"})]},
                 "notes": {"deleted": [{"key": {"id": "N1"}, "row": {"id": "N1"}}]},
                 "refunds": {"inserted": [{"key": {"id": f"R{i}"}, "row": {}} for i in range(5)]}}
    assert unrequested(other_row, allowed, NOTHING_FREE) == [
        "orders[W2] updated: status 'pending' → 'cancelled' (a row the task leaves alone)",
        "notes[N1] deleted (the task deletes no such row)",
        "5 row(s) inserted into refunds (R0, R1, R2 …); the task inserts 1"]
    touched = {"orders": {"updated": [updated("W2", {"updated_at": "t0"}, {"updated_at": "t1"})]}}
    assert unrequested(touched, allowed, free_of(["orders.updated_at"])) == []


def test_an_episode_must_fit_the_gold_or_one_alternative_whole():
    credit = {"credits": {"inserted": [{"key": {"id": "C1"}, "row": {}}]},
              "orders": GOLD["orders"]}
    assert guard(credit, [GOLD], NOTHING_FREE) == (
        False, "unrequested change: 1 row(s) inserted into credits (C1); the task inserts 0")
    assert guard(credit, [GOLD, credit], NOTHING_FREE) == (
        True, "2 written row(s), all within an alternative's footprint")
    # parts of two ways are neither way
    both = {**credit, "refunds": GOLD["refunds"]}
    assert guard(both, [GOLD, credit], NOTHING_FREE)[0] is False
    assert guard(GOLD, [GOLD], NOTHING_FREE) == (True, "2 written row(s), all within the gold's footprint")


def test_every_task_is_graded_with_the_guard_unless_it_writes_its_own():
    task = {"checks": [{"kind": "row"}]}
    assert guarded(task) == [{"kind": "row"}, FOOTPRINT]
    own = {"checks": [{"kind": "footprint", "free": ["orders"]}]}
    assert guarded(own) == own["checks"]


# -- the built-in domains ------------------------------------------------------------------------

# (task, the one call after its gold, the table it writes, what the guard says): the side effect an
# optimizer finds in each domain: a booking's dates moved after its downgrade, a ticket re-routed
# after it is left pending, a card's limit raised after it is frozen, an assignment's end moved
# with its hours, the customer's email changed, a driver added to a policy.
COLLATERAL = [
    ("travel-downgrade-approved", "change_dates",
     {"booking_id": "B900021", "check_in": "2026-03-24", "check_out": "2026-03-26"}, "bookings",
     ("bookings[B900021] updated: check_in '2026-04-06' → '2026-03-24', check_out '2026-04-08' → "
      "'2026-03-26' (the task changes only nightly_rate, room_type, total there)")),
    ("support-resolve-blocked-by-open-exception", "route_ticket", {"ticket_id": "T90003", "queue": "billing"},
     "tickets", ("tickets[T90003] updated: queue 'shipping' → 'billing', assignee 'AG013' → None (the "
                 "task changes only status there)")),
    ("bank-freeze-misplaced-card", "change_card_limit", {"card_id": "K90001", "new_limit": 3000.0}, "cards",
     "cards[K90001] updated: spending_limit 2000.0 → 3000.0 (the task changes only status there)"),
    ("consulting-raise-hours-only-to-capacity-trap", "change_assignment",
     {"assignment_id": "AS91901", "hours_per_week": 24.0, "end_date": "2026-03-27"}, "assignments",
     ("assignments[AS91901] updated: end_date '2026-06-26' → '2026-03-27' (the task changes only "
      "hours_per_week there)")),
    ("retail-return-too-late", "update_customer_email", {"customer_id": "C9004", "email": "ada.ok@newmail.example"},
     "customers", ("customers[C9004] updated: email 'tomas.ortega@example.com' → 'ada.ok@newmail.example' "
                   "(a row the task leaves alone)")),
    ("insurance-withdraw-claim-single-call", "add_driver",
     {"policy_id": "P90101", "name": "Mateus Oduya", "license_number": "D7730412", "birth_date": "1988-06-14"},
     None, "1 row(s) inserted into drivers (DR05338); the task inserts 0"),
]


@pytest.mark.parametrize(("task_id", "tool", "args", "table", "said"), COLLATERAL,
                         ids=[c[0].split("-")[0] for c in COLLATERAL])
def test_one_unrequested_write_after_the_gold_scores_zero_and_is_named(grader, tasks, task_id, tool, args,
                                                                       table, said):
    task = tasks.get(task_id)
    assert grade_steps(grader, task, task["gold"])["reward"] == 1
    steps = [*task["gold"], {"tool": tool, "args": args}]
    graded = grade_steps(grader, task, steps)
    assert graded["reward"] == 0
    assert failed_checks(graded)["footprint"] == f"unrequested change: {said}"
    if table is not None:  # every other check passes it: without the guard it scored 1
        assert set(failed_checks(graded)) == {"footprint"}
        freed = copy.deepcopy(task)
        freed["checks"].append({"id": "footprint", "kind": "footprint", "free": [table]})
        assert grade_steps(grader, freed, steps)["reward"] == 1


# (task, two gold calls swapped): the same writes in another order. The wallet's two replacement
# cards then take each other's new ids, a different end state that is just as right.
OTHER_ORDER = [("bank-stolen-wallet-two-cards-fraud", 3, 4), ("consulting-discount-needs-partner-file-and-staff-at-card", 5, 6),
               ("insurance-rental-capped-at-limit", 4, 5), ("retail-cancel-one-move-other", 1, 2),
               ("support-delivered-close-exception-then-ticket", 2, 3), ("travel-three-changes-one-needs-approval", 3, 6)]


@pytest.mark.parametrize(("task_id", "a", "b"), OTHER_ORDER, ids=[c[0].split("-")[0] for c in OTHER_ORDER])
def test_the_same_calls_in_another_order_still_score_one(grader, tasks, task_id, a, b):
    task = tasks.get(task_id)
    steps = list(task["gold"])
    assert all(steps[i].get("tool") and grader.domains[task["domain"]].tools[steps[i]["tool"]].writes for i in (a, b))
    steps[a], steps[b] = steps[b], steps[a]
    graded = grade_steps(grader, task, steps)
    assert graded["reward"] == 1, failed_checks(graded)


def test_a_detour_that_ends_where_the_gold_does_still_scores_one(grader, tasks):
    """A wrong address first, then the right one; a ticket set pending before it is resolved."""
    task = tasks.get("retail-update-address")
    call = next(s for s in task["gold"] if s.get("tool") == "update_shipping_address")
    wrong = {"tool": call["tool"], "args": {**call["args"], "address": "1 Wrong Way, Madison, WI 53703"}}
    at = task["gold"].index(call)
    assert grade_steps(grader, task, [*task["gold"][:at], wrong, *task["gold"][at:]])["reward"] == 1
    task = tasks.get("support-resolve-answered-question")
    call = next(s for s in task["gold"] if s.get("tool") == "resolve_ticket")
    at = task["gold"].index(call)
    detour = {"tool": "update_ticket_status", "args": {"ticket_id": call["args"]["ticket_id"], "status": "pending"}}
    graded = grade_steps(grader, task, [*task["gold"][:at], detour, *task["gold"][at:]])
    assert graded["reward"] == 1, failed_checks(graded)


def test_a_task_lists_another_correct_way_as_an_alternative(grader, tasks):
    """retail-return-too-late asks for no write; an escalation to a person is made right by an
    alternative that takes that path."""
    task = copy.deepcopy(tasks.get("retail-return-too-late"))
    escalate = {"tool": "transfer_to_human", "args": {"customer_id": "C9004", "order_id": "W90012",
                                                      "summary": "Wants to return an order past the window."}}
    steps = [*task["gold"], escalate]
    assert failed_checks(grade_steps(grader, task, steps)).keys() == {"footprint"}
    task["checks"].append({"id": "footprint", "kind": "footprint", "alternatives": [steps]})
    assert grade_steps(grader, task, steps)["reward"] == 1


def test_a_free_name_that_is_no_table_or_column_is_the_tasks_defect(grader, tasks):
    task = copy.deepcopy(tasks.get("retail-cancel-pending"))
    task["checks"].append({"kind": "footprint", "free": ["orders.nope"]})
    graded = grade_steps(grader, task, task["gold"])
    assert (graded["status"], graded["reward"], graded["error"]["kind"]) == ("system_error", None, "task")
    assert "footprint check frees ['orders.nope']: neither a table, a table.column nor a column of " \
           "domain retail" in graded["error"]["message"]
