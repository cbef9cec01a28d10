"""`said` reads numbers as values (word boundaries, thousands separators, currency), and a `row`
check without `expect` checks that the row exists. Both through the grader on real retail states."""

import copy

import orjson
import pytest
from conftest import run_tool

from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader
from endstate.core.grading.match import numbers_in, said


@pytest.mark.parametrize("value, text", [
    (4, "You have 4 open orders."),
    (4, "4"),
    (4, "That is $4.00, refunded."),
    (4, "Down by -4 and up by 4%."),
    (4, "Items (4), total: 4."),
    (1250, "The refund is $1,250.00."),
    (1250, "The refund is 1,250 dollars."),
    (1250, "The refund is 1250.00 USD."),
    (1250.5, "It comes to €1,250.50 in all."),
    (12.5, "You owe $12.50 in fines."),
    (-4, "Your balance moved by -$4."),
    (1212.4, "Your total: 1212.4 dollars"),
    (0.5, "Half: 0.5 of it."),
    (2024, "Placed in 2024."),
])
def test_a_number_matches_a_standalone_numeral_of_its_value(value, text):
    assert said(value, text)


@pytest.mark.parametrize("value, text", [
    (4, "You have 14 open orders."),
    (4, "The fee is 4.5 dollars."),
    (4, "Order W4 shipped, order 4B did not."),
    (4, "It arrives on the 4th."),
    (4, "SKU-4 is out of stock."),
    (4, "Delivered 2024-01-04 at 10:04."),
    (4, "Allow 4-5 business days."),
    (4, "Allow 3–4 business days."),  # a range with an en dash, as models write it
    (3, "Allow 3–4 business days."),
    (4, "About 3/4 of it."),
    (4, "Version 4.1.2 is out."),
    (24, "Placed in 2024."),
    (250, "The refund is $1,250.00."),
    (1, "The refund is $1,250.00."),
    (1250, "Reference 1250A, or 91250."),
    (1212.4, "About 1212."),
    (4, "Balance: -4."),
])
def test_a_number_does_not_match_inside_another_number_word_or_date(value, text):
    assert not said(value, text)


def test_numbers_in_reads_every_standalone_value():
    assert numbers_in("$1,250.00 and -$4, order W1042, 4.5% off, 2024-01-04, 7") == [1250.0, -4.0, 4.5, 7.0]


def test_strings_still_match_as_normalized_substrings():
    assert said("$1,250.00", "the refund is 1250.00 today")
    assert said("Order W1042", "your order   w1042 is on its way")
    assert not said("W1042", "order W1043")


# -- through the grader ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


def graded(grader, tasks, task_id, checks, steps):
    task = copy.deepcopy(tasks.get(task_id))
    task["checks"] = checks
    return grader.grade(replay(grader.domains[task["domain"]], task, steps), task)


def test_said_numbers_decide_the_reward(grader, tasks):
    lookups = tasks.get("retail-latest-order-total")["gold"][:2]
    check = [{"kind": "said", "value": 1212.4}]
    for text, reward in [("It was $1,212.40.", 1), ("It was 1,212.40 dollars", 1),
                         ("Order 21212.40 is not yours", 0), ("It was 1212.404", 1), ("It was 1212.45", 0)]:
        result = graded(grader, tasks, "retail-latest-order-total", check, lookups + [{"say": text}])
        assert result["reward"] == reward, text


def test_a_row_check_without_expect_passes_when_the_row_exists(grader, tasks):
    gold = tasks.get("retail-cancel-pending")["gold"]
    checks = [{"id": "refund-exists", "kind": "row", "table": "refunds", "where": {"order_id": "W90001"}},
              {"id": "order-exists", "kind": "row", "table": "orders", "where": {"id": "W90001"}}]
    done = graded(grader, tasks, "retail-cancel-pending", checks, gold)
    assert done["reward"] == 1
    assert done["checks"][1]["detail"] == "orders[W90001] exists"
    assert done["checks"][0]["detail"].endswith(" exists")
    nothing = graded(grader, tasks, "retail-cancel-pending", checks, [])
    assert nothing["reward"] == 0
    assert [c["detail"] for c in nothing["checks"]][0] == (
        "refunds where order_id='W90001': expected one row, found no row")


def test_an_existence_check_alone_makes_a_sound_task(tmp_path, tasks):
    source = tasks.get("retail-cancel-pending")
    gold = [*source["gold"][:2], {**source["gold"][2], "free": ["reason"]}]  # a refund shows no reason
    task = {"id": "retail-cancel-exists", "domain": "retail", "init": source["init"], "gold": gold,
            "user": {"instruction": "Cancel W90001.", "opening": "Cancel my order."}}
    task["checks"] = [{"kind": "row", "table": "refunds", "where": {"order_id": "W90001"}}]
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(task) + b"\n")
    p = run_tool("grade", "validate", str(path))
    assert p.returncode == 0, p.stderr
    assert '"sound":true' in p.stdout
