"""Named Python checks for support tasks: for what the declarative check kinds cannot express.

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail).
"""

import sqlite3

TIER_CAP = {"standard": 25.0, "plus": 50.0, "premier": 100.0}  # policy.md, "Credits"
REASON_FOR = {"delayed": "delay", "lost": "loss", "damaged": "damage"}


def no_ticket_resolved_over_open_exception(db: sqlite3.Connection, messages: list,
                                           ticket_id: str | None = None):
    """No resolved ticket (or: ticket `ticket_id` is not resolved) while the carrier exception on its
    shipment is open. The seed keeps this rule, so checking every ticket is sound."""
    sql = ("SELECT t.id, x.id, x.shipment_id FROM tickets t JOIN carrier_exceptions x "
           "ON x.shipment_id = t.shipment_id WHERE t.status = 'resolved' AND x.status = 'open'")
    params: tuple = ()
    if ticket_id:
        sql += " AND t.id = ?"
        params = (ticket_id,)
    bad = db.execute(sql + " ORDER BY t.id", params).fetchall()
    if bad:
        return False, "; ".join(f"tickets[{t}] was resolved while carrier exception {x} on shipment "
                                f"{s} is still open" for t, x, s in bad[:3])
    return True, "no ticket is resolved over an open carrier exception"


def credit_within_policy(db: sqlite3.Connection, messages: list, ticket_id: str):
    """At most one credit on the ticket, within the customer's tier cap, and only for a shipment
    with a delayed, lost or damaged exception, with the matching reason."""
    credits = db.execute("SELECT id, amount, reason FROM credits WHERE ticket_id = ? ORDER BY id",
                         (ticket_id,)).fetchall()
    if not credits:
        return True, f"no credit on ticket {ticket_id}"
    if len(credits) > 1:
        return False, f"ticket {ticket_id} has {len(credits)} credits; policy allows one"
    credit_id, amount, reason = credits[0]
    tier, shipment_id = db.execute(
        "SELECT c.tier, t.shipment_id FROM tickets t JOIN customers c ON c.id = t.customer_id "
        "WHERE t.id = ?", (ticket_id,)).fetchone()
    if amount > TIER_CAP[tier] + 0.005:
        return False, (f"credits[{credit_id}].amount: {amount} is above the {tier} cap of "
                       f"{TIER_CAP[tier]:.2f}")
    kinds = {k for (k,) in db.execute("SELECT kind FROM carrier_exceptions WHERE shipment_id = ?",
                                      (shipment_id,))} if shipment_id else set()
    allowed = {REASON_FOR[k] for k in kinds if k in REASON_FOR}
    if reason not in allowed:
        why = (f"its shipment's exceptions allow {sorted(allowed)}" if allowed
               else "its shipment has no delayed, lost or damaged exception")
        return False, f"credits[{credit_id}].reason: {reason!r} but {why}"
    return True, f"credits[{credit_id}]: {amount} ({reason}) within the {tier} cap"


def one_claim_per_exception(db: sqlite3.Connection, messages: list, exception_id: str):
    """Exactly one carrier claim for the exception."""
    claims = [c for (c,) in db.execute("SELECT id FROM claims WHERE exception_id = ? ORDER BY id",
                                       (exception_id,))]
    if len(claims) != 1:
        return False, (f"expected one claim for exception {exception_id}, found {len(claims)}"
                       + (f": {', '.join(claims)}" if claims else ""))
    return True, f"claims[{claims[0]}] is the only claim for {exception_id}"
