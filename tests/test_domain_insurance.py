"""insurance domain (auto insurance, out of distribution): a deterministic seed of realistic size,
the hard rules its tools enforce, the claim rules (traps) its checks catch with a detail naming the
broken rule. Its benchmark (tasks/ood) and generator are tested in test_ood_suites.py."""

import copy
import json
import sqlite3

import pytest
from conftest import ROOT, failed_checks, grade_steps

from endstate.core.env.sandbox import Sandbox
from endstate.core.grading.grader import TaskIndex

BENCH = ROOT / "tasks" / "ood" / "insurance.jsonl"


@pytest.fixture(scope="module")
def insurance(domains):
    return domains["insurance"]


@pytest.fixture(scope="module")
def suite(domains):
    return TaskIndex(domains, [str(BENCH)])


def replaced(task, tool, step):
    """The task's gold with its (first) call of `tool` replaced by `step`."""
    gold = copy.deepcopy(task["gold"])
    gold[next(i for i, s in enumerate(gold) if s.get("tool") == tool)] = step
    return gold


# -- the seed ------------------------------------------------------------------------------------

def test_seed_is_deterministic_and_has_thousands_of_rows(insurance):
    data, digest = insurance.seed()
    assert insurance.build_seed()[1] == digest
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    count = lambda sql: conn.execute(sql).fetchone()[0]
    assert count("SELECT count(*) FROM customers") == 2500
    assert count("SELECT count(*) FROM policies") > 2800 and count("SELECT count(*) FROM vehicles") > 5000
    assert count("SELECT count(*) FROM coverages") > 15000 and count("SELECT count(*) FROM claims") > 2000
    assert count("SELECT count(*) FROM policies WHERE status = 'lapsed'") > 100
    assert count("SELECT count(*) FROM drivers WHERE status = 'excluded'") > 50
    # the seed keeps its own rules: no payment on a claim the policy denies, none over $5,000
    # without an approved review
    assert count("SELECT count(*) FROM payments p JOIN claims c ON c.id = p.claim_id "
                 "WHERE c.status = 'denied'") == 0
    assert count("SELECT count(*) FROM (SELECT claim_id, sum(amount) AS total FROM payments "
                 "GROUP BY claim_id) t WHERE total > 5000 AND NOT EXISTS (SELECT 1 FROM "
                 "adjuster_reviews r WHERE r.claim_id = t.claim_id AND r.status = 'approved' "
                 "AND r.amount >= t.total - 0.005)") == 0


# -- hard rules: enforced by the tools -----------------------------------------------------------

def test_tools_refuse_what_the_policy_system_forbids(insurance, suite):
    task = suite.get("insurance-rental-capped-at-limit")
    claim = task["init"]["claims"][0]["id"]
    with Sandbox(insurance, task["init"]) as sandbox:
        def error(tool, args):
            return json.loads(sandbox.call(tool, args).content)["error"]
        assert error("pay_claim", {"claim_id": claim, "coverage": "rental", "amount": 800}) == \
            "the payment cannot exceed the rental estimate of 720.00"
        assert error("pay_claim", {"claim_id": claim, "coverage": "roadside", "amount": 50}) == \
            "vehicle V90701 has no roadside coverage"
        assert error("file_claim", {"policy_id": "P90701", "vehicle_id": "V00001",
                                    "loss_date": "2026-03-01", "loss_type": "glass",
                                    "description": "x"}) == "vehicle V00001 is not on policy P90701"
        assert error("file_claim", {"policy_id": "P90701", "vehicle_id": "V90701",
                                    "loss_date": "2026-04-01", "loss_type": "glass",
                                    "description": "x"}) == "loss_date 2026-04-01 is in the future"
        assert sandbox.call("pay_claim", {"claim_id": claim, "coverage": "rental", "amount": 600}).ok
        assert error("pay_claim", {"claim_id": claim, "coverage": "rental", "amount": 10}) == \
            f"claim {claim} was already paid under rental"
        assert error("deny_claim", {"claim_id": claim, "reason": "not_covered"}) == \
            f"claim {claim} already has payments"


def test_reinstatement_charges_the_overdue_months_deterministically(insurance, suite):
    task = suite.get("insurance-reinstate-within-30-days")
    results = []
    for _ in range(2):
        with Sandbox(insurance, task["init"]) as sandbox:
            results.append(sandbox.call("reinstate_policy", {"policy_id": "P92301"}).value)
    assert results[0] == results[1]
    assert results[0]["charged"] == 285.5 and results[0]["paid_through"] == "2026-03-31"
    assert results[0]["uncovered"] == "2026-02-16 to 2026-03-09"


# -- policy-only rules: the tools allow them, the checks catch them --------------------------------

def test_paying_a_loss_after_the_lapse_scores_zero(grader, suite):
    task = suite.get("insurance-loss-after-lapse-denied-trap")
    graded = grade_steps(grader, task, replaced(task, "deny_claim", {"tool": "pay_claim", "args": {
        "claim_id": "CL91301", "coverage": "collision", "amount": 2900.0}}))
    assert "error" not in graded["messages"][-2]["content"]  # the tool itself let it through
    assert graded["reward"] == 0
    assert failed_checks(graded)["per-policy"] == (
        "claims[CL91301] is not covered (not_in_force); paid: collision 2,900.00")


def test_denying_a_loss_before_the_lapse_scores_zero(grader, suite):
    task = suite.get("insurance-lapsed-now-but-loss-before-lapse-paid-trap")
    graded = grade_steps(grader, task, replaced(task, "pay_claim", {"tool": "deny_claim", "args": {
        "claim_id": "CL91401", "reason": "not_in_force"}}))
    assert graded["reward"] == 0
    assert failed_checks(graded)["per-policy"] == (
        "claims[CL91401] comprehensive: due 1,715.60, paid 0.00")


def test_paying_over_5000_without_an_adjuster_scores_zero(grader, suite):
    task = suite.get("insurance-split-claim-over-5000-needs-adjuster-trap")
    steps = task["gold"][:4] + [{"tool": "pay_claim", "args": {
        "claim_id": "CL90901", "coverage": c, "amount": a}} for c, a in
        (("collision", 6445.2), ("rental", 560.0), ("roadside", 120.0))]
    graded = grade_steps(grader, task, steps)
    assert graded["reward"] == 0
    assert set(failed_checks(graded)) == {"review-filed", "nothing-paid", "no-side-effects", "footprint"}


def test_paying_a_tow_on_a_loss_that_is_not_covered_scores_zero(grader, suite):
    task = suite.get("insurance-liability-only-not-covered-trap")
    graded = grade_steps(grader, task, task["gold"][:4] + [{"tool": "pay_claim", "args": {
        "claim_id": "CL91801", "coverage": "roadside", "amount": 95.0}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["per-policy"] == (
        "claims[CL91801] is not covered (not_covered); paid: roadside 95.00")


def test_paying_past_a_coverage_limit_scores_zero(grader, suite):
    task = suite.get("insurance-rental-capped-at-limit")
    graded = grade_steps(grader, task, replaced(task, "pay_claim", task["gold"][4])[:4] + [
        task["gold"][4], {"tool": "pay_claim", "args": {"claim_id": "CL90701",
                                                        "coverage": "rental", "amount": 720.0}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["per-policy"] == "claims[CL90701] rental: due 600.00, paid 720.00"


def test_paying_with_the_new_deductible_scores_zero(grader, suite):
    task = suite.get("insurance-lower-deductible-then-pay-with-the-old-one")
    graded = grade_steps(grader, task, replaced(task, "pay_claim", {"tool": "pay_claim", "args": {
        "claim_id": "CL92701", "coverage": "collision", "amount": 2650.0}}))
    assert graded["reward"] == 0
    assert failed_checks(graded) == {"paid-collision": (
        "payments[PY01580].amount: expected 2150.0 ± 0.005, got 2650.0")}


def test_reinstating_past_30_days_or_relisting_an_excluded_driver_scores_zero(grader, suite):
    late = suite.get("insurance-reinstate-too-late-escalate-trap")
    graded = grade_steps(grader, late, late["gold"][:3] + [
        {"tool": "reinstate_policy", "args": {"policy_id": "P92401"}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["still-lapsed"] == "policies[P92401].status: expected 'lapsed', got 'active'"
    relist = suite.get("insurance-relist-excluded-son-escalate-trap")
    graded = grade_steps(grader, relist, relist["gold"][:3] + [{"tool": "add_driver", "args": {
        "policy_id": "P92601", "name": "Felix Marr", "license_number": "D5521907",
        "birth_date": "2004-09-09"}}])
    assert graded["reward"] == 0
    assert failed_checks(graded)["no-new-driver"] == (
        "drivers where policy_id='P92601', name='Felix Marr': expected 1 row(s), got 2")
