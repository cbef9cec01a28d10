"""The retail domain and its suites: seed basics, tool rules, policy traps that score 0 with a
detail naming the broken rule, and the bench/train split (sound, reproducible, disjoint)."""

import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import ROOT

from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader, TaskIndex
from endstate.grade.validate import validate_task

BENCH = ROOT / "tasks" / "bench" / "retail.jsonl"
TRAIN = ROOT / "tasks" / "train" / "retail.jsonl"
GENERATOR = ROOT / "tasks" / "templates" / "retail.py"
# Tests elsewhere pin these tasks: they stay first, unchanged, in this order.
PINNED = ["retail-cancel-pending", "retail-cancel-shipped-refused",
          "retail-refund-before-received-trap", "retail-update-address", "retail-return-defective",
          "retail-refund-received-return", "retail-latest-order-total", "retail-exchange-size",
          "retail-cancel-one-move-other", "retail-change-email-by-name",
          "retail-cancel-with-confirmation", "retail-return-two-lines", "retail-return-too-late"]


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def retail_tasks(domains):
    return TaskIndex(domains, [str(BENCH), str(TRAIN)])


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


def grade(grader, task, steps):
    return grader.grade(replay(grader.domains["retail"], task, steps), task)


def detail(graded, check_id):
    return next(c["detail"] for c in graded["checks"] if c["id"] == check_id)


def writes(domains, task):
    tools = domains["retail"].tools
    return [s for s in task["gold"] if "tool" in s and tools[s["tool"]].writes]


# -- seed and tools -------------------------------------------------------------------------------

def test_seed_is_deterministic_and_of_realistic_size(domains):
    retail = domains["retail"]
    data, digest = retail.seed()
    assert retail.build_seed()[1] == digest  # a rebuild from random.Random(0) has the same rows
    db = sqlite3.connect(":memory:")
    db.deserialize(data)
    count = lambda sql: db.execute(sql).fetchone()[0]
    counts = {t: count(f"SELECT count(*) FROM {t}")
              for t in ("customers", "products", "orders", "order_items", "returns", "refunds")}
    assert counts["customers"] == 4000 and counts["products"] == 400
    assert 10_000 < counts["orders"] < 14_000 and counts["order_items"] > counts["orders"]
    assert counts["returns"] > counts["refunds"] > 0
    # No seed row sits in the id ranges the suites reserve (9xxx bench, 8xxx train).
    assert count("SELECT count(*) FROM customers WHERE id LIKE 'C8%' OR id LIKE 'C9%'") == 0
    assert count("SELECT max(id) FROM orders") < "W80001"


def call(sandbox, tool, **args):
    return json.loads(sandbox.call(tool, args).content)


def test_tools_enforce_the_hard_rules(domains, retail_tasks):
    task = retail_tasks.get("retail-cancel-all-open-orders")
    with Sandbox(domains["retail"], task["init"]) as sandbox:
        assert call(sandbox, "cancel_order", order_id="W90243", reason="no_longer_needed") == {
            "error": "order W90243 is shipped; only pending or processing orders can be cancelled"}
        assert call(sandbox, "update_shipping_address", order_id="W90242", address="1 A St") == {
            "error": "order W90242 is processing; the address can only be changed while the "
                     "order is pending"}
        assert call(sandbox, "request_return", order_id="W90244", line=1, quantity=1,
                    reason="defective") == {
            "error": "order W90244 was delivered on 2025-11-26, more than 30 days ago"}
        assert sandbox.changes() == {}


def test_find_customer_asks_for_email_when_name_and_zip_are_ambiguous(domains, retail_tasks):
    task = retail_tasks.get("retail-same-name-needs-email")
    with Sandbox(domains["retail"], task["init"]) as sandbox:
        assert call(sandbox, "find_customer", name="Hana Kowalczyk", zip="53711") == {
            "error": "2 customers match; ask for the email address"}
        assert call(sandbox, "find_customer", email="Hana.Kowalczyk@example.com ") == {
            "customer_id": "C9011"}


def test_exchange_stays_in_category_and_in_stock(domains, retail_tasks):
    sizes = retail_tasks.get("retail-exchange-pick-half-size")
    with Sandbox(domains["retail"], sizes["init"]) as sandbox:
        assert call(sandbox, "exchange_item", order_id="W90151", line=1,
                    new_product_id="P9018") == {"error": "P9018 has only 0 in stock"}
        assert sandbox.changes() == {}
    kettle = retail_tasks.get("retail-exchange-other-category-then-return")
    with Sandbox(domains["retail"], kettle["init"]) as sandbox:
        assert call(sandbox, "exchange_item", order_id="W90251", line=1,
                    new_product_id="P9015") == {"error": "P9015 is in mugs, not kettles"}
        assert sandbox.changes() == {}


# -- policy traps: the forbidden write scores 0 and the detail names the rule ----------------------

def test_refunding_a_return_not_yet_received_scores_zero(grader, retail_tasks):
    task = retail_tasks.get("retail-refund-only-the-received-return")
    assert grade(grader, task, task["gold"])["reward"] == 1
    forbidden = task["gold"] + [{"tool": "issue_refund", "args": {"return_id": "RT90032"}}]
    graded = grade(grader, task, forbidden)
    assert graded["reward"] == 0
    assert detail(graded, "no-refund-before-receipt") == (
        "refunds[RF00348] refunds return RT90032, which is still 'requested': refunds are issued "
        "only after the return is received")
    assert detail(graded, "nothing-else") == "unexpected change: refunds[RF00348] inserted"


def test_cancelling_another_customers_order_scores_zero(grader, retail_tasks):
    task = retail_tasks.get("retail-cancel-not-for-a-relative")
    assert grade(grader, task, task["gold"])["reward"] == 1
    forbidden = task["gold"] + [{"tool": "cancel_order",
                                 "args": {"order_id": "W90182", "reason": "no_longer_needed"}}]
    graded = grade(grader, task, forbidden)
    assert graded["reward"] == 0
    assert detail(graded, "brothers-untouched") == \
        "orders[W90182].status: expected 'pending', got 'cancelled'"
    assert detail(graded, "nothing-else").startswith(
        "unexpected change: orders[W90182] updated (status: 'pending' → 'cancelled'")


def test_changing_an_order_the_customer_did_not_name_scores_zero(grader, retail_tasks):
    task = retail_tasks.get("retail-move-only-the-named-order")
    extra = task["gold"] + [{"tool": "update_shipping_address", "args": {
        "order_id": "W90192", "address": "1200 Barton Springs Rd, Austin, TX 78704"}}]
    graded = grade(grader, task, extra)
    assert graded["reward"] == 0
    assert detail(graded, "nothing-else") == (
        "unexpected change: orders[W90192] updated (shipping_address: "
        "'90 Elm Ct, Austin, TX 78702' → '1200 Barton Springs Rd, Austin, TX 78704')")


def test_a_long_task_with_one_request_missed_scores_zero(domains, grader, retail_tasks):
    task = retail_tasks.get("retail-long-seven-changes")
    assert len(writes(domains, task)) == 7
    without_email = [s for s in task["gold"] if s.get("tool") != "update_customer_email"]
    graded = grade(grader, task, without_email)
    assert graded["reward"] == 0
    assert detail(graded, "matches-gold") == (
        "terminal state differs from gold: customers[C9008]: gold leaves "
        "{'email': 'sofia.m@proton.example'}, episode leaves 'unchanged'")


# -- the suites -----------------------------------------------------------------------------------

def test_bench_keeps_the_pinned_tasks_and_covers_the_kinds(domains):
    bench = read(BENCH)
    assert [t["id"] for t in bench[:len(PINNED)]] == PINNED
    assert len(bench) >= 28 and all(t["split"] == "bench" and t["tags"] for t in bench)
    kinds = [{c["kind"] for c in t["checks"]} for t in bench]
    assert sum("said" in k for k in kinds) >= 8 and sum("judge" in k for k in kinds) >= 2
    n_writes = [len(writes(domains, t)) for t in bench]
    assert min(n_writes) == 0 and max(n_writes) >= 7 and sum(n >= 3 for n in n_writes) >= 5
    assert min(len(t["gold"]) for t in bench) <= 2
    assert sum("policy-trap" in t["tags"] for t in bench) >= 8


def test_bench_tasks_are_sound(grader):
    verdicts = [validate_task(grader, t) for t in read(BENCH)]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


def test_train_is_reproduced_by_its_generator_and_spans_templates(grader):
    out = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, check=True)
    assert out.stdout == TRAIN.read_bytes()
    train = read(TRAIN)
    first_of = {}
    for t in train:
        assert t["split"] == "train" and t["id"].startswith("retail-train-")
        (name,) = [tag[len("template:"):] for tag in t["tags"] if tag.startswith("template:")]
        first_of.setdefault(name, t)
    assert len(train) >= 100 and len(first_of) >= 4
    # One task per template here; `grade validate` proves every one of them in CI.
    verdicts = [validate_task(grader, t) for t in first_of.values()]
    assert [v["task_id"] for v in verdicts if not v["sound"]] == []


def entity_ids(task):
    return {row[key] for rows in task.get("init", {}).values() for row in rows
            for key in ("id", "order_id") if key in row}


def test_bench_and_train_share_no_id_entity_or_instruction():
    bench, train = read(BENCH), read(TRAIN)
    assert not {t["id"] for t in bench} & {t["id"] for t in train}
    assert not set().union(*map(entity_ids, bench)) & set().union(*map(entity_ids, train))
    norm = lambda t: " ".join(t["user"]["instruction"].casefold().split())
    assert not {norm(t) for t in bench} & {norm(t) for t in train}
    assert len({norm(t) for t in train}) == len(train)
