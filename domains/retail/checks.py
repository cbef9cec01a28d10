"""Named Python checks for retail tasks: for what the declarative check kinds cannot express.

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail).
"""

import sqlite3


def refund_matches_return(db: sqlite3.Connection, messages: list, return_id: str):
    """Exactly one refund for the return, of unit price × returned quantity, to the order's card."""
    refunds = db.execute("SELECT id, amount, payment_method_id FROM refunds WHERE return_id = ?",
                         (return_id,)).fetchall()
    if len(refunds) != 1:
        return False, f"expected one refund for return {return_id}, found {len(refunds)}"
    refund_id, amount, method = refunds[0]
    due, order_method = db.execute(
        "SELECT i.unit_price * r.quantity, o.payment_method_id FROM returns r "
        "JOIN order_items i ON i.order_id = r.order_id AND i.line = r.line "
        "JOIN orders o ON o.id = r.order_id WHERE r.id = ?", (return_id,)).fetchone()
    if abs(amount - due) > 0.005:
        return False, f"refunds[{refund_id}].amount: {amount} but the return is worth {due:.2f}"
    if method != order_method:
        return False, f"refunds[{refund_id}] went to {method}, not the order's {order_method}"
    return True, f"refunds[{refund_id}]: {amount} to {method}"


def refunds_only_received_returns(db: sqlite3.Connection, messages: list, order_id: str):
    """No refund of the order is tied to a return the warehouse has not received (the policy trap:
    issue_refund itself does not check)."""
    early = db.execute(
        "SELECT f.id, r.id, r.status FROM refunds f JOIN returns r ON r.id = f.return_id "
        "WHERE f.order_id = ? AND r.status != 'received' ORDER BY f.id", (order_id,)).fetchall()
    if early:
        refund_id, return_id, status = early[0]
        return False, (f"refunds[{refund_id}] refunds return {return_id}, which is still "
                       f"{status!r}: refunds are issued only after the return is received")
    return True, f"no refund of order {order_id} precedes the receipt of its return"
