"""Named Python checks for consulting tasks: the firm's rules of policy.md that span several rows
(capacity, rate cards, approval chains, budgets).

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail). The constants mirror policy.md.
"""

import sqlite3

LARGE_INVOICE = 50000.0


def _card_rate(db: sqlite3.Connection, engagement_id: str, level: str) -> float:
    row = db.execute("SELECT r.hourly_rate FROM engagements e JOIN clients c ON c.id = e.client_id "
                     "JOIN rate_cards r ON r.rate_card = c.rate_card AND r.level = ? "
                     "WHERE e.id = ?", (level, engagement_id)).fetchone()
    if row is None:
        row = db.execute("SELECT hourly_rate FROM rate_cards WHERE rate_card = 'standard' AND "
                         "level = ?", (level,)).fetchone()
    return row[0]


def assignment_within_policy(db: sqlite3.Connection, messages: list, engagement_id: str,
                             employee_id: str):
    """The employee's assignments on the engagement fit their capacity (their booked hours over
    each assignment's dates, that one included, at most their weekly capacity), avoid their time
    off, and bill the card rate for their level, or a lower rate with an approved rate_exception
    for exactly that rate."""
    level, capacity = db.execute("SELECT level, weekly_capacity FROM employees WHERE id = ?",
                                 (employee_id,)).fetchone()
    rows = db.execute("SELECT id, start_date, end_date, bill_rate FROM assignments WHERE "
                      "engagement_id = ? AND employee_id = ? ORDER BY id",
                      (engagement_id, employee_id)).fetchall()
    if not rows:
        return True, f"{employee_id} has no assignment on {engagement_id}"
    card = _card_rate(db, engagement_id, level)
    for aid, start, end, rate in rows:
        booked = db.execute("SELECT coalesce(sum(hours_per_week), 0) FROM assignments WHERE "
                            "employee_id = ? AND start_date <= ? AND end_date >= ?",
                            (employee_id, end, start)).fetchone()[0]
        if booked > capacity + 0.005:
            return False, (f"assignments[{aid}]: {employee_id} is booked {booked:g} h/week over "
                           f"{start}..{end}, above their capacity of {capacity:g}")
        off = db.execute("SELECT start_date, end_date FROM time_off WHERE employee_id = ? AND "
                         "start_date <= ? AND end_date >= ?", (employee_id, end, start)).fetchone()
        if off:
            return False, f"assignments[{aid}] overlaps {employee_id}'s time off {off[0]}..{off[1]}"
        if rate > card + 0.005:
            return False, f"assignments[{aid}].bill_rate {rate:,.2f} is above the card's {card:,.2f}"
        if rate < card - 0.005 and not db.execute(
                "SELECT 1 FROM approvals WHERE kind = 'rate_exception' AND reference = ? AND "
                "employee_id = ? AND status = 'approved' AND abs(amount - ?) < 0.005",
                (engagement_id, employee_id, rate)).fetchone():
            return False, (f"assignments[{aid}].bill_rate {rate:,.2f} is below the card's "
                           f"{card:,.2f} without an approved rate exception")
    return True, f"{employee_id} on {engagement_id}: within capacity, on the card or an approved rate"


def time_approved_per_chain(db: sqlite3.Connection, messages: list, engagement_id: str):
    """Every approved or billed entry of the engagement was approved by its manager, or by its
    partner for the manager's own time, and never by its author."""
    manager, partner = db.execute("SELECT manager_id, partner_id FROM engagements WHERE id = ?",
                                  (engagement_id,)).fetchone()
    for entry_id, author, approver in db.execute(
            "SELECT id, employee_id, approved_by FROM time_entries WHERE engagement_id = ? AND "
            "status IN ('approved', 'billed') ORDER BY id", (engagement_id,)):
        allowed = partner if author == manager else manager
        if approver != allowed:
            who = "its own author" if approver == author else approver
            return False, (f"time_entries[{entry_id}] was approved by {who}; {allowed} approves "
                           f"{author}'s time on {engagement_id}")
    return True, f"every approved entry on {engagement_id} has the right approver"


def billed_only_approved_time(db: sqlite3.Connection, messages: list, engagement_id: str):
    """No entry of the engagement is billed without having been approved."""
    bad = [r[0] for r in db.execute("SELECT id FROM time_entries WHERE engagement_id = ? AND "
                                    "status = 'billed' AND approved_by IS NULL ORDER BY id",
                                    (engagement_id,))]
    if bad:
        return False, (f"{len(bad)} unapproved time entr{'y' if len(bad) == 1 else 'ies'} billed "
                       f"on {engagement_id}: {', '.join(bad[:5])}")
    return True, f"only approved time is billed on {engagement_id}"


def billing_within_budget(db: sqlite3.Connection, messages: list, engagement_id: str):
    """The engagement's invoices (but void ones) bill no more than its budget, or than an
    approved change order's new budget."""
    budget, billed = db.execute(
        "SELECT e.budget, (SELECT coalesce(sum(amount), 0) FROM invoices WHERE engagement_id = "
        "e.id AND status != 'void') FROM engagements e WHERE e.id = ?", (engagement_id,)).fetchone()
    raised = db.execute("SELECT max(amount) FROM approvals WHERE kind = 'change_order' AND "
                        "reference = ? AND status = 'approved'", (engagement_id,)).fetchone()[0]
    cap = max(budget, raised or 0.0)
    if billed > cap + 0.005:
        return False, f"{engagement_id} has billed {billed:,.2f}, over its budget of {cap:,.2f}"
    return True, f"{engagement_id} has billed {billed:,.2f} of {cap:,.2f}"


def large_invoices_approved(db: sqlite3.Connection, messages: list, engagement_id: str):
    """Every issued invoice of the engagement over $50,000.00 has an approved `invoice` approval
    for at least its amount."""
    for invoice_id, amount in db.execute(
            "SELECT id, amount FROM invoices WHERE engagement_id = ? AND status IN ('issued', "
            "'paid') AND amount > ? ORDER BY id", (engagement_id, LARGE_INVOICE)):
        if not db.execute("SELECT 1 FROM approvals WHERE kind = 'invoice' AND reference = ? AND "
                          "status = 'approved' AND amount >= ? - 0.005",
                          (invoice_id, amount)).fetchone():
            return False, (f"invoices[{invoice_id}] of {amount:,.2f} was issued without the "
                           "partner's approval")
    return True, f"every large invoice on {engagement_id} is approved"
