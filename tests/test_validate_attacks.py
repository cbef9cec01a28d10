"""grade validate attacks each task as an optimizer would (grade.attacks): after the gold calls, one
unrequested write with every writing tool, aimed at the gold's rows and the task's other rows; it
varies each writing argument with the same entity's other rows first (grade.sensitivity.Entities);
it warns of an argument the tool ignores; and it counts what it tried, per task and for the suite."""

import copy
import json

from conftest import ROOT, run_tool

from endstate.grade.sensitivity import Entities
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "bench" / "retail.jsonl"


def test_an_unrequested_write_that_scores_one_makes_the_task_unsound_and_is_named(grader, tasks):
    """retail-update-address with a check on the new address alone and a guard that frees the
    orders and refunds tables (a task author's mistakes): cancelling the same order afterwards
    passes every check."""
    task = copy.deepcopy(tasks.get("retail-update-address"))
    assert validate_task(grader, task)["sound"]
    task["checks"] = [{"id": "new-address", "kind": "row", "table": "orders", "where": {"id": "W90031"},
                       "expect": {"shipping_address": "400 Lake Shore Dr, Madison, WI 53703"}},
                      {"id": "footprint", "kind": "footprint", "free": ["orders", "refunds"]}]
    verdict = validate_task(grader, task)
    assert not verdict["sound"]
    assert {"tool": "cancel_order", "args": {"order_id": "W90031", "reason": "no_longer_needed"}} \
        in verdict["unrequested_writes"]
    assert ("an unrequested write scores 1: cancel_order(order_id='W90031', reason='no_longer_needed') "
            "after the gold calls (a check or the footprint guard must fail it: pin what it changed, or "
            "take the column out of FREE)") in verdict["problems"]
    counts = verdict["attacks"]
    assert counts["tried"] >= counts["wrote"] > counts["scored_0"] >= 0
    assert counts["wrote"] - counts["scored_0"] == len(verdict["unrequested_writes"])


def test_every_unrequested_write_on_a_sound_task_scores_zero(grader, tasks):
    verdict = validate_task(grader, tasks.get("retail-update-address"))
    assert verdict["sound"] and verdict["unrequested_writes"] == []
    counts = verdict["attacks"]
    assert counts["wrote"] == counts["scored_0"] > 0  # the attack changed the end state, and lost


def test_an_id_is_varied_with_the_same_owners_other_rows_first(domains, tasks):
    """The stolen wallet's two cards belong to one customer and account: each is the other's
    first alternative; then the seed's cards nearest in id (another customer's)."""
    task = tasks.get("bank-stolen-wallet-two-cards-fraud")
    cards = {c["id"]: c for c in task["init"]["cards"]}
    assert cards["K90021"]["customer_id"] == cards["K90022"]["customer_id"]
    entities = Entities(domains["bank"], task)
    try:
        related = entities.related("K90021", most=3)
        assert related[0] == "K90022" and len(related) == 3 and related[1] < "K90021"
        assert entities.related("not an id") == [] and entities.related(3) == []
    finally:
        entities.close()


LOSSY_TOOLS = '''
from endstate.api import Db, tool


@tool(writes=True)
def set_note(db: Db, item_id: str, note: str, reason: str) -> dict:
    """Set an item's note.

    Args:
        item_id: The item.
        note: The note.
        reason: Why: this port takes it and forgets to store it.
    """
    db.run("UPDATE items SET note = ? WHERE id = ?", note, item_id)
    return {"item_id": item_id}
'''


def test_an_argument_the_tool_does_not_store_is_a_warning_naming_tool_and_argument(tmp_path):
    domain = tmp_path / "lossy"
    domain.mkdir()
    (domain / "schema.sql").write_text("CREATE TABLE items (id TEXT PRIMARY KEY, note TEXT, reason TEXT);\n")
    (domain / "seed.py").write_text("def build(db, rng):\n"
                                    "    db.executemany('INSERT INTO items VALUES (?, NULL, NULL)', [('I1',), ('I2',)])\n")
    (domain / "tools.py").write_text(LOSSY_TOOLS)
    task = {"id": "lossy-note", "domain": "lossy", "split": "bench",
            "user": {"instruction": "Item I1 is fragile.", "opening": "Note it."},
            "checks": [{"id": "noted", "kind": "row", "table": "items", "where": {"id": "I1"},
                        "expect": {"note": "fragile"}}],
            "gold": [{"tool": "set_note", "args": {"item_id": "I1", "note": "fragile", "reason": "customer asked"}}]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task) + "\n")
    p = run_tool("grade", "validate", "--domains", str(domain), str(path),
                 env={"ENDSTATE_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr  # a warning, not a defect of the task
    verdict = json.loads(p.stdout)
    assert [(f["tool"], f["arg"]) for f in verdict["ignored_args"]] == [("set_note", "reason")]
    assert verdict["arguments"] == {"tried": 3, "varied": 2, "ignored": 1, "unvaried": 0}
    assert (f"{path}:1: task lossy-note: warning: argument reason of gold call #0 set_note is ignored by "
            "the tool: it accepted 'deksa remotsuc' and the end state stayed the gold's (does the tool "
            "store it?)") in p.stderr


def test_the_summary_counts_what_validate_tried(tmp_path):
    p = run_tool("grade", "validate", str(BENCH))
    assert p.returncode == 0, p.stderr
    verdicts = [json.loads(line) for line in p.stdout.splitlines()]
    arguments = {k: sum(v["arguments"][k] for v in verdicts) for k in ("tried", "varied", "ignored", "unvaried")}
    attacks = {k: sum(v["attacks"][k] for v in verdicts) for k in ("tried", "wrote", "scored_0")}
    assert attacks["wrote"] == attacks["scored_0"] > 0
    assert p.stderr.splitlines()[-1] == (
        f"writing arguments: {arguments['tried']:,} tried, {arguments['varied']:,} varied, "
        f"{arguments['ignored']:,} ignored by the tool, {arguments['unvaried']:,} not varied; unrequested "
        f"writes: {attacks['tried']:,} tried, {attacks['wrote']:,} changed the end state, all scored 0")
