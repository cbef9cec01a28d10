"""bank domain (an app-only neobank): a deterministic seed of realistic size, the hard rules its
tools enforce, the policy-only rules (traps) its checks catch with a detail naming the violated
expectation, and a train suite that its generator reproduces byte for byte, disjoint from the
bench."""

import copy
import json
import runpy
import sqlite3

import pytest
from conftest import ROOT, failed_checks, grade_steps, read_jsonl

from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader

BENCH = ROOT / "tasks" / "bench" / "bank.jsonl"
TRAIN = ROOT / "tasks" / "train" / "bank.jsonl"
GENERATOR = ROOT / "tasks" / "templates" / "bank.py"


@pytest.fixture(scope="module")
def bank(domains):
    return domains["bank"]


@pytest.fixture(scope="module")
def grader(domains):
    return Grader(domains)


def with_step(task, index, step):
    """The task's gold with step `index` replaced by `step`."""
    gold = copy.deepcopy(task["gold"])
    gold[index] = step
    return gold


# -- the seed ------------------------------------------------------------------------------------

def test_seed_is_deterministic_and_has_thousands_of_rows(bank):
    data, digest = bank.seed()
    assert bank.build_seed()[1] == digest
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    count = lambda table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert count("customers") == 2500
    assert count("accounts") > 3500 and count("cards") > 3000
    assert count("transactions") > 40000
    assert min(count(t) for t in ("disputes", "transfers", "limit_requests", "travel_notices")) > 50
    # money is stored rounded to the cent
    assert conn.execute("SELECT count(*) FROM transactions WHERE amount != round(amount, 2)"
                        ).fetchone()[0] == 0


# -- hard rules: enforced by the tools -----------------------------------------------------------

def test_tools_refuse_what_the_bank_system_forbids(bank, tasks):
    init = tasks.get("bank-dispute-pending-charge")["init"]
    with Sandbox(bank, init) as sandbox:
        pending = sandbox.call("open_dispute", {"transaction_id": "T9000071", "reason": "duplicate"})
        assert json.loads(pending.content) == {
            "error": "transaction T9000071 is still pending; it can be disputed once posted"}
        foreign = sandbox.call("transfer_funds", {"from_account_id": "A90011",
                                                  "to_account_id": "A00001", "amount": 10})
        assert json.loads(foreign.content) == {
            "error": "transfers are only possible between the same customer's accounts"}
        assert not sandbox.call("unfreeze_card", {"card_id": "K90012"}).ok  # it is active
        assert sandbox.changes() == {}


def test_replacement_card_keeps_the_limit_and_gets_a_deterministic_number(bank, tasks):
    init = tasks.get("bank-replace-damaged-card-by-name")["init"]
    results = []
    for _ in range(2):
        with Sandbox(bank, init) as sandbox:
            results.append(sandbox.call("replace_card", {"card_id": "K90004", "reason": "damaged"}).value)
    assert results[0] == results[1]
    assert results[0]["spending_limit"] == 2500.0 and results[0]["new_card_id"] == "K90006"


# -- policy-only rules: the tools allow them, the checks catch them --------------------------------

def test_transfer_over_the_daily_limit_scores_zero_and_names_the_limit(grader, tasks):
    task = tasks.get("bank-transfer-over-daily-limit-trap")
    forbidden = with_step(task, 4, {"tool": "transfer_funds", "args": {
        "from_account_id": "A90016", "to_account_id": "A90017", "amount": 800.0}})
    graded = grade_steps(grader, task, forbidden)
    assert "error" not in graded["messages"][-2]["content"]  # the tool itself let it through
    assert graded["reward"] == 0
    assert failed_checks(graded)["within-daily-limit"] == (
        "transfers from A90016 today total 2,300.00, over its daily transfer limit of 2,000.00")
    assert failed_checks(graded)["transferred-500"] == (
        "transfers[TR90002].amount: expected 500.0, got 800.0")


def test_limit_above_the_kyc_cap_set_directly_scores_zero(grader, tasks):
    task = tasks.get("bank-limit-above-kyc-cap-trap")
    forbidden = with_step(task, 3, {"tool": "change_card_limit",
                                    "args": {"card_id": "K90016", "new_limit": 2500.0}})
    graded = grade_steps(grader, task, forbidden)
    assert graded["reward"] == 0
    assert failed_checks(graded)["limit-unchanged"] == (
        "cards[K90016].spending_limit: expected 500.0, got 2500.0")


def test_fraud_dispute_opened_before_freezing_the_card_scores_zero(grader, tasks):
    task = tasks.get("bank-fraud-charge-freeze-dispute-credit")
    gold = task["gold"]
    freeze = next(i for i, s in enumerate(gold) if s.get("tool") == "freeze_card")
    out_of_order = gold[:freeze] + gold[freeze + 1:freeze + 2] + [gold[freeze]] + gold[freeze + 2:]
    graded = grade_steps(grader, task, out_of_order)
    assert graded["reward"] == 0
    assert failed_checks(graded) == {"card-frozen-first": (
        "disputes[D90002] was opened while the card was active; freeze the card before opening a "
        "fraud dispute")}


def test_provisional_credit_under_the_threshold_scores_zero(grader, tasks):
    task = tasks.get("bank-not-received-small-no-credit-trap")
    opened = next(m for m in replay(grader.domains["bank"], task, task["gold"])["messages"]
                  if m.get("name") == "open_dispute")
    dispute_id = json.loads(opened["content"])["dispute_id"]  # the seed decides the number
    graded = grade_steps(grader, task, task["gold"] + [
        {"tool": "issue_provisional_credit", "args": {"dispute_id": dispute_id}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["no-credit"] == (
        f"disputes[{dispute_id}] is not eligible (not_received, 78.90 is under 100.00): provisional "
        "credit should be 0.00, got 78.90 (credited to the account: 78.90)")


def test_unfreezing_a_card_under_fraud_dispute_scores_zero(grader, tasks):
    task = tasks.get("bank-unfreeze-with-fraud-dispute-trap")
    graded = grade_steps(grader, task, task["gold"][:3] + [
        {"tool": "unfreeze_card", "args": {"card_id": "K90003"}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["old-card-cancelled"] == (
        "cards[K90003].status: expected 'cancelled', got 'active'; "
        "cards[K90003].cancel_reason: expected 'compromised', got None")


# -- the app's features (a neobank): the same split of hard rules and traps -----------------------

def test_seed_has_the_apps_features_within_their_rules(bank):
    conn = sqlite3.connect(":memory:")
    conn.deserialize(bank.seed()[0])
    count = lambda sql: conn.execute(sql).fetchone()[0]
    assert count("SELECT count(*) FROM cards WHERE form = 'virtual'") > 500
    assert min(count(f"SELECT count(*) FROM {t}") for t in
               ("payees", "instant_transfers", "pots", "pot_movements")) > 500
    assert count("SELECT max(n) FROM (SELECT count(*) AS n FROM cards WHERE form = 'virtual' "
                 "AND status != 'cancelled' GROUP BY customer_id)") <= 3
    assert count("SELECT count(*) FROM pot_movements m JOIN pots p ON p.id = m.pot_id WHERE "
                 "m.direction = 'out' AND p.locked_until IS NOT NULL") == 0


def test_app_tools_refuse_what_the_system_forbids(bank, tasks):
    init = tasks.get("bank-instant-sent-to-wrong-payee-escalate")["init"]
    with Sandbox(bank, init) as sandbox:
        def error(tool, args):
            return json.loads(sandbox.call(tool, args).content)["error"]
        assert error("send_instant_transfer", {"from_account_id": "A90040", "payee_id": "PE90014",
                                               "amount": 5000}) == "account A90040 has only 960.00"
        assert error("send_instant_transfer", {"from_account_id": "A00001", "payee_id": "PE90014",
                                               "amount": 5}) == \
            "payee PE90014 is not one of this customer's payees"
        assert error("add_payee", {"customer_id": "C9014", "name": "X", "account_number": "12-ab",
                                   "bank": "Chase"}) == "account_number '12-ab' is not a number"
        assert sandbox.changes() == {}


def test_instant_transfers_past_the_kyc_or_new_payee_limit_score_zero(grader, tasks):
    over = tasks.get("bank-instant-over-kyc-daily-limit-trap")
    graded = grade_steps(grader, over, with_step(over, 4, {"tool": "send_instant_transfer", "args": {
        "from_account_id": "A90038", "payee_id": "PE90012", "amount": 420.0}}))
    assert "error" not in graded["messages"][-2]["content"]  # the tool itself let it through
    assert graded["reward"] == 0
    assert failed_checks(graded)["within-limits"] == (
        "instant transfers of C9012 today total 570.00, over the KYC level 1 daily limit of 500.00")
    new = tasks.get("bank-new-payee-first-day-cap-trap")
    graded = grade_steps(grader, new, with_step(new, 4, {"tool": "send_instant_transfer", "args": {
        "from_account_id": "A90039", "payee_id": "PE90014", "amount": 850.0}}))
    assert failed_checks(graded)["within-limits"] == (
        "payee PE90014 was added less than 24 hours ago and got 850.00, over the 250.00 cap on "
        "new payees")


def test_emptying_a_locked_pot_or_a_fourth_virtual_card_scores_zero(grader, tasks):
    pot = tasks.get("bank-locked-pot-emergency-trap")
    graded = grade_steps(grader, pot, pot["gold"][:2] + [
        {"tool": "withdraw_from_pot", "args": {"pot_id": "PT90015", "amount": 600.0}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["lock-kept"] == (
        "pots[PT90015] is locked until 2026-06-30, but 600.00 left it today (status open)")
    cards = tasks.get("bank-fourth-virtual-card-refused-trap")
    graded = grade_steps(grader, cards, cards["gold"][:2] + [
        {"tool": "create_virtual_card", "args": {"account_id": "A90043", "spending_limit": 300}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["no-new-card"] == "cards where customer_id='C9017': expected 4 row(s), got 5"


# -- the suites ----------------------------------------------------------------------------------


def test_generator_reproduces_the_committed_train_file(capsys):
    runpy.run_path(str(GENERATOR), run_name="__main__")
    assert capsys.readouterr().out == TRAIN.read_text()


def test_suites_meet_the_minimums_and_do_not_overlap():
    bench, train = read_jsonl(BENCH), read_jsonl(TRAIN)
    assert len(bench) >= 25 and len(train) >= 100
    assert {t["split"] for t in bench} == {"bench"} and {t["split"] for t in train} == {"train"}
    templates = {tag for t in train for tag in t["tags"] if tag.startswith("template:")}
    assert len(templates) >= 4
    assert not {t["id"] for t in bench} & {t["id"] for t in train}
    norm = lambda s: " ".join(s.lower().split())
    assert not {norm(t["user"]["instruction"]) for t in bench} & \
        {norm(t["user"]["instruction"]) for t in train}
    # entities live in reserved ranges: bench C9xxx, train C8xxx
    assert all(c["id"].startswith("C9") for t in bench for c in t["init"]["customers"])
    assert all(c["id"].startswith("C8") for t in train for c in t["init"]["customers"])
    assert sum("policy-trap" in t["tags"] for t in bench) >= 8
    assert sum(any(c["kind"] == "judge" for c in t["checks"]) for t in bench) >= 1
