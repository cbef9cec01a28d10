"""grade validate's argument sensitivity on the real retail domain: an argument of a writing gold
call that no check can tell makes a task unsound unless the call lists it as `free`; values the
tool refuses are skipped. The alternatives themselves are pure functions, tested here too."""

import copy
import json

import pytest
from conftest import ROOT, run_tool

from endstate.grade.alternatives import alternatives, same, shaped_like, variants
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "bench" / "retail.jsonl"
TRAIN = ROOT / "tasks" / "train" / "retail.jsonl"
CANCEL = "retail-cancel-pending"  # gold #2: cancel_order(order_id='W90001', reason='no_longer_needed')


def cancel_task(tasks, expect=None, free=None):
    """retail-cancel-pending, its row check expecting `expect`, its cancel call free in `free`."""
    task = copy.deepcopy(tasks.get(CANCEL))
    if expect is not None:
        task["checks"][0]["expect"] = expect
    if free is not None:
        task["gold"][2]["free"] = free
    return task


def test_a_check_that_pins_the_argument_leaves_no_finding(grader, tasks):
    verdict = validate_task(grader, cancel_task(tasks))
    assert verdict["sound"] and verdict["insensitive_args"] == [] and verdict["problems"] == []
    # the customer has no other order; the seed's orders nearest the id are not pending and the
    # tool refuses to cancel them: said, not passed off as proven
    assert verdict["unvaried_args"] == [{"index": 2, "tool": "cancel_order", "arg": "order_id",
                                         "tried": ["W21830", "W21829", "W21828"]}]
    assert verdict["arguments"] == {"tried": 2, "varied": 1, "ignored": 0, "unvaried": 1}


def test_a_check_that_ignores_an_argument_makes_the_task_unsound(grader, tasks):
    verdict = validate_task(grader, cancel_task(tasks, expect={"status": "cancelled"}))
    assert not verdict["sound"]
    assert verdict["insensitive_args"] == [{"index": 2, "tool": "cancel_order", "arg": "reason",
                                            "value": "no_longer_needed", "unnoticed": "ordered_by_mistake"}]
    assert verdict["problems"] == [
        "no check notices when argument reason of gold call #2 cancel_order is 'ordered_by_mistake' "
        "instead of 'no_longer_needed': pin it in a check, or list it in the call's \"free\" if any "
        "value will do"]


def test_a_free_argument_is_not_varied(grader, tasks):
    verdict = validate_task(grader, cancel_task(tasks, expect={"status": "cancelled"}, free=["reason"]))
    assert verdict["sound"] and verdict["insensitive_args"] == []


def test_free_naming_no_argument_of_the_call_is_a_problem(grader, tasks):
    verdict = validate_task(grader, cancel_task(tasks, free=["reasons"]))
    assert not verdict["sound"]
    assert verdict["problems"] == ["gold call #2 cancel_order lists 'reasons' in \"free\", but the call "
                                   "has no argument 'reasons'; its arguments: order_id, reason"]


def test_values_the_tool_refuses_are_skipped_not_reported(grader, tasks):
    """With a check that cannot see the cancellation at all, every accepted value goes unnoticed;
    the order ids the tool refuses (no such order) must not be reported as unnoticed."""
    task = cancel_task(tasks)
    task["checks"] = [{"id": "vacuous", "kind": "absent", "table": "refunds", "where": {"order_id": "W99999"}}]
    verdict = validate_task(grader, task)
    assert [f["arg"] for f in verdict["insensitive_args"]] == ["reason"]
    assert [(u["arg"], u["tried"]) for u in verdict["unvaried_args"]] == [("order_id", ["W21830", "W21829", "W21828"])]


def test_validate_varies_free_text_with_values_of_other_tasks_and_says_where(tmp_path):
    """From the command line, alternatives include what the argument is in the gold calls of the
    other tasks validated with it: a train task's summary goes unnoticed by the bench trap's
    checks once the trap no longer lists its summary as free."""
    tasks = [json.loads(line) for line in BENCH.read_text().splitlines()]
    trap = next(t for t in tasks if t["id"] == "retail-refund-before-received-trap")
    assert trap["gold"][3].pop("free") == ["summary"]
    other = next(t for t in map(json.loads, TRAIN.read_text().splitlines())
                 if any(s.get("tool") == "transfer_to_human" for s in t["gold"]))
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in [*tasks, other]))
    p = run_tool("grade", "validate", str(path))
    assert p.returncode == 1
    bad = [v for v in map(json.loads, p.stdout.splitlines()) if not v["sound"]]
    assert [v["task_id"] for v in bad] == [trap["id"]]
    (summary,) = [s["args"]["summary"] for s in other["gold"] if s.get("tool") == "transfer_to_human"]
    assert bad[0]["insensitive_args"] == [{"index": 3, "tool": "transfer_to_human", "arg": "summary",
                                           "value": trap["gold"][3]["args"]["summary"], "unnoticed": summary}]
    line = tasks.index(trap) + 1
    assert f"{path}:{line}: task {trap['id']} is unsound: no check notices when argument summary" in p.stderr


@pytest.mark.parametrize("schema, value, expected", [
    ({"type": "string", "enum": ["a", "b", "c"]}, "b", ["a", "c"]),
    ({"type": "boolean"}, True, [False]),
    ({"type": "integer"}, 3, [4, 2]),
    ({"type": "number"}, 250.0, [251.0, 249.0, 275.0]),
    ({"anyOf": [{"type": "number"}, {"type": "null"}]}, 10, [11, 9, 11.0]),
    ({"type": "string"}, "2026-02-28", ["2026-03-01", "2026-02-27"]),
    ({"type": "string"}, "2026-02-28T09:30:00", ["2026-03-01T09:30:00", "2026-02-27T09:30:00"]),
    ({"type": "string"}, "W90071", ["W90072", "W90070"]),
    ({"type": "string"}, "K00000", ["K00001"]),
    ({"type": "string"}, "just words", []),
    ({"type": "array", "items": {"type": "string"}}, ["TE1", "TE2"], [["TE1"], ["TE2"], ["TE1", "TE3"]]),
    ({"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
     {"n": 1, "s": "x"}, [{"n": 2, "s": "x"}]),
    ({"type": "integer", "enum": [250, 500, 1000]}, 500, [250, 1000]),
])
def test_variants_of_each_kind(schema, value, expected):
    assert variants(schema, value) == expected


def test_alternatives_order_dedupe_and_the_garbled_string():
    schema = {"type": "string"}
    assert alternatives(schema, "W90071", near=["W90075"], others=["W90072", "W90071", "W10"]) == \
        ["W90075", "W90072", "W90070", "W10", "17009W"]
    # an enum member is not garbled (the schema refuses it before any replay anyway)
    assert alternatives({"type": "string", "enum": ["a", "b"]}, "a", others=["b"]) == ["b"]
    # null is never offered: leaving out an optional argument is the tool's to allow
    assert None not in alternatives({"anyOf": [{"type": "string"}, {"type": "null"}]}, "note",
                                    others=[None, "other note"])


def test_ids_near_are_of_the_same_shape_and_capped():
    rows = ["W90001", "W900011", "X90002", "W90003", 7, "W90004", "W90003"]
    assert shaped_like("W90002", rows, 2) == ["W90001", "W90003"]
    assert shaped_like("Portugal, Spain", rows, 3) == []


def test_same_is_json_equality():
    assert same(1, 1.0) and same([1, {"a": 2}], [1.0, {"a": 2.0}])
    assert not same(True, 1) and not same("1", 1) and not same({"a": 1}, {"a": 1, "b": 2})
