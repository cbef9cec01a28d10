"""Named Python checks for insurance tasks: the claim rules of policy.md, which need the policy,
the driver, the coverages and the estimates of a claim at once.

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail). The constants mirror policy.md.
"""

import sqlite3

REVIEW_THRESHOLD = 5000.0
MAIN_COVERAGE = {"collision": "collision", "theft": "comprehensive", "weather": "comprehensive",
                 "glass": "comprehensive", "vandalism": "comprehensive", "animal": "comprehensive"}


def why_not_covered(db: sqlite3.Connection, claim_id: str) -> str | None:
    """The denial reason policy.md gives the claim (not_in_force, excluded_driver, not_covered), or
    None when its loss is covered."""
    loss, loss_type, vehicle, driver, effective, expires, lapsed, reinstated = db.execute(
        "SELECT c.loss_date, c.loss_type, c.vehicle_id, c.driver_id, p.effective_date, "
        "p.expiration_date, p.lapsed_on, p.reinstated_on FROM claims c JOIN policies p "
        "ON p.id = c.policy_id WHERE c.id = ?", (claim_id,)).fetchone()
    if not effective <= loss <= expires or (
            lapsed and lapsed <= loss and (reinstated is None or loss < reinstated)):
        return "not_in_force"
    if driver and db.execute("SELECT status FROM drivers WHERE id = ?",
                             (driver,)).fetchone()[0] == "excluded":
        return "excluded_driver"
    if not db.execute("SELECT 1 FROM coverages WHERE vehicle_id = ? AND kind = ?",
                      (vehicle, MAIN_COVERAGE[loss_type])).fetchone():
        return "not_covered"
    return None


def payout_due(db: sqlite3.Connection, claim_id: str) -> dict[str, float]:
    """Per estimated coverage, what policy.md pays: the estimate less the deductible, within the
    limit; coverages whose estimate does not exceed the deductible are left out."""
    due = {}
    for coverage, amount, limit, deductible in db.execute(
            "SELECT e.coverage, e.amount, v.limit_amount, v.deductible FROM estimates e "
            "JOIN claims c ON c.id = e.claim_id JOIN coverages v ON v.vehicle_id = c.vehicle_id "
            "AND v.kind = e.coverage WHERE e.claim_id = ? ORDER BY e.coverage", (claim_id,)):
        if amount > deductible + 0.005:
            due[coverage] = round(min(limit, amount - deductible), 2)
    return due


def claim_settled_per_policy(db: sqlite3.Connection, messages: list, claim_id: str):
    """The claim's payments are what policy.md gives: none for a loss it does not cover, none
    while a payout over $5,000.00 lacks an approved adjuster review of at least that total, and
    otherwise exactly the amount due under each estimated coverage."""
    paid = dict(db.execute("SELECT coverage, sum(amount) FROM payments WHERE claim_id = ? "
                           "GROUP BY coverage", (claim_id,)).fetchall())
    listed = ", ".join(f"{c} {a:,.2f}" for c, a in sorted(paid.items())) or "nothing"
    reason = why_not_covered(db, claim_id)
    if reason:
        return not paid, f"claims[{claim_id}] is not covered ({reason}); paid: {listed}"
    due = payout_due(db, claim_id)
    total = round(sum(due.values()), 2)
    approved = db.execute("SELECT max(amount) FROM adjuster_reviews WHERE claim_id = ? AND "
                          "status = 'approved'", (claim_id,)).fetchone()[0]
    if total > REVIEW_THRESHOLD and (approved is None or approved < total - 0.005):
        return not paid, (f"claims[{claim_id}] pays {total:,.2f} in all, over "
                          f"{REVIEW_THRESHOLD:,.2f} without an approved adjuster review: nothing "
                          f"may be paid yet; paid: {listed}")
    wrong = [f"{c}: due {due.get(c, 0.0):,.2f}, paid {paid.get(c, 0.0):,.2f}"
             for c in sorted(set(due) | set(paid)) if abs(due.get(c, 0.0) - paid.get(c, 0.0)) > 0.005]
    if wrong:
        return False, f"claims[{claim_id}] " + "; ".join(wrong)
    return True, f"claims[{claim_id}] paid as due: {listed}"


def denied_for_the_right_reason(db: sqlite3.Connection, messages: list, claim_id: str):
    """The claim is denied if and only if policy.md says so, and with its reason."""
    status, given = db.execute("SELECT status, denial_reason FROM claims WHERE id = ?",
                               (claim_id,)).fetchone()
    reason = why_not_covered(db, claim_id)
    if reason is None:
        return status != "denied", f"claims[{claim_id}] is covered; status {status}"
    if status != "denied" or given != reason:
        return False, (f"claims[{claim_id}] should be denied ({reason}); status {status}, "
                       f"reason {given}")
    return True, f"claims[{claim_id}] denied ({reason})"
