"""Every built-in domain's tools check the value they store: a number after it is rounded (0.004
hours or 5e-324 dollars round to 0.0), within the range the tool's docstring gives, and a date
within sane bounds (a birth date of 9999-12-31, a lock until year 9999). Each case runs a task's
gold up to a call of the tool, then the call with one value changed: refused, nothing stored.
(retail stores no amount and no date an agent gives: its return quantity is an integer checked
against the order line.)"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, read_jsonl

from endstate.core.env.sandbox import Sandbox

SUITES = [*sorted((ROOT / "tasks").glob("bench/*.jsonl")), *sorted((ROOT / "tasks").glob("ood/*.jsonl")),
          *sorted((ROOT / "tasks").glob("train/*.jsonl"))]
FAR = "9999-12-31"

CASES = [  # (tool, the changed arguments, what the error says)
    ("change_card_limit", {"new_limit": 5e-324}, "new_limit must be positive"),
    ("change_card_limit", {"new_limit": 0.004}, "new_limit must be positive"),
    ("create_virtual_card", {"spending_limit": 0.001}, "spending_limit must be positive"),
    ("request_limit_increase", {"requested_limit": 0.004}, "requested_limit must be positive"),
    ("transfer_funds", {"amount": 0.004}, "amount must be positive"),
    ("send_instant_transfer", {"amount": 0.004}, "amount must be positive"),
    ("move_to_pot", {"amount": 0.004}, "amount must be positive"),
    ("withdraw_from_pot", {"amount": 0.004}, "amount must be positive"),
    ("open_dispute", {"amount": 0.004}, "amount must be positive"),
    ("create_pot", {"goal": -50}, "goal must be positive"),
    ("create_pot", {"locked_until": FAR}, f"locked_until {FAR} is after 2199-12-31"),
    ("add_travel_notice", {"end_date": FAR}, f"end_date {FAR} is after 2199-12-31"),
    ("assign_consultant", {"hours_per_week": 0.004}, "hours_per_week must be between 1 and 60"),
    ("assign_consultant", {"hours_per_week": 0.5}, "hours_per_week must be between 1 and 60"),
    ("assign_consultant", {"bill_rate": 0.001}, "bill_rate must be positive"),
    ("assign_consultant", {"end_date": FAR}, f"end_date {FAR} is after 2199-12-31"),
    ("change_assignment", {"hours_per_week": 0.004}, "hours_per_week must be between 1 and 60"),
    ("log_time", {"hours": 0.1}, "hours must be between 0.25 and 24"),
    ("log_time", {"work_date": "0001-01-01"}, "work_date 0001-01-01 is before 1900-01-01"),
    ("request_approval", {"amount": 0.004}, "amount must be positive"),
    ("add_driver", {"birth_date": FAR}, f"birth_date {FAR} is after 2026-03-10"),
    ("add_driver", {"birth_date": "2026-03-11"}, "birth_date 2026-03-11 is after 2026-03-10"),
    ("add_driver", {"birth_date": "1890-05-01"}, "birth_date 1890-05-01 is before 1906-01-01"),
    ("pay_claim", {"amount": 0.004}, "amount must be positive"),
    ("request_adjuster_review", {"amount": 0.004}, "amount must be positive"),
    ("file_claim", {"loss_date": "0001-01-01"}, "loss_date 0001-01-01 is before 1900-01-01"),
    ("file_carrier_claim", {"amount": 0.004}, "the amount must be more than 0"),
    ("issue_credit", {"amount": 0.004}, "a credit must be more than 0"),
    ("create_booking", {"check_in": "20260316"}, "dates must be YYYY-MM-DD"),
    ("change_dates", {"check_in": "2026-03-18", "check_out": FAR}, f"check_out {FAR} is after 2199-12-31"),
]


def first_call(tool: str) -> tuple[dict, int]:
    """The first task of the built-in suites whose gold calls `tool`, and that call's index."""
    for path in SUITES:
        for task in read_jsonl(path):
            for i, step in enumerate(task["gold"]):
                if step.get("tool") == tool:
                    return task, i
    raise AssertionError(f"no built-in task calls {tool}")


def run_up_to(sandbox, task: dict, index: int) -> None:
    for step in task["gold"][:index]:
        if "tool" in step:
            assert sandbox.call(step["tool"], step["args"]).ok, step


@pytest.mark.parametrize("tool, changed, says", CASES, ids=[f"{t}-{'-'.join(c)}" for t, c, _ in CASES])
def test_a_value_the_tool_would_store_wrong_is_refused(domains, tool, changed, says):
    task, index = first_call(tool)
    domain, gold = domains[task["domain"]], task["gold"][index]["args"]
    with Sandbox(domain, task.get("init")) as sandbox:  # the gold call is taken: only the value differs
        run_up_to(sandbox, task, index)
        assert sandbox.call(tool, gold).ok
    with Sandbox(domain, task.get("init")) as sandbox:
        run_up_to(sandbox, task, index)
        before = sandbox.changes()
        result = sandbox.call(tool, {**gold, **changed})
        assert not result.ok, result.content
        assert says in json.loads(result.content)["error"], result.content
        assert sandbox.changes() == before  # nothing stored
