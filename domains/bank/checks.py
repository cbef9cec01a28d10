"""Named Python checks for bank tasks: the policy rules that need arithmetic over several rows.

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail). The constants mirror policy.md.
"""

import sqlite3

TODAY = "2026-01-15"
KYC_CAPS = {1: 1000.0, 2: 3000.0, 3: 10000.0}
CREDIT_THRESHOLD = 100.0


def transfers_within_daily_limit(db: sqlite3.Connection, messages: list, account_id: str):
    """Today's outgoing transfers from the account total no more than its daily transfer limit."""
    limit, sent = db.execute(
        "SELECT a.daily_transfer_limit, coalesce(sum(t.amount), 0) FROM accounts a "
        "LEFT JOIN transfers t ON t.from_account_id = a.id AND t.created_at >= ? "
        "WHERE a.id = ?", (TODAY, account_id)).fetchone()
    if sent > limit + 0.005:
        return False, (f"transfers from {account_id} today total {sent:,.2f}, over its daily "
                       f"transfer limit of {limit:,.2f}")
    return True, f"transfers from {account_id} today total {sent:,.2f} of {limit:,.2f}"


def provisional_credit_per_policy(db: sqlite3.Connection, messages: list, transaction_id: str):
    """The dispute on the transaction got a provisional credit of its full amount if eligible
    (fraud, or disputed amount >= $100.00), and none otherwise; the account was credited to
    match."""
    disputes = db.execute("SELECT id, reason, amount, provisional_credit FROM disputes "
                          "WHERE transaction_id = ?", (transaction_id,)).fetchall()
    if len(disputes) != 1:
        return False, f"expected one dispute on {transaction_id}, found {len(disputes)}"
    dispute_id, reason, amount, credit = disputes[0]
    eligible = reason == "fraud" or amount >= CREDIT_THRESHOLD - 0.005
    credited = db.execute("SELECT coalesce(sum(amount), 0) FROM transactions WHERE kind = "
                          "'provisional_credit' AND merchant = ?",
                          (f"Provisional credit {dispute_id}",)).fetchone()[0]
    due = amount if eligible else 0.0
    if abs(credit - due) > 0.005 or abs(credited - due) > 0.005:
        why = (f"eligible ({reason}, {amount:,.2f})" if eligible else
               f"not eligible ({reason}, {amount:,.2f} is under {CREDIT_THRESHOLD:,.2f})")
        return False, (f"disputes[{dispute_id}] is {why}: provisional credit should be "
                       f"{due:,.2f}, got {credit:,.2f} (credited to the account: {credited:,.2f})")
    return True, f"disputes[{dispute_id}]: provisional credit {credit:,.2f} as policy requires"


def fraud_card_frozen_first(db: sqlite3.Connection, messages: list, transaction_id: str):
    """The fraud dispute on the transaction was opened while its card was frozen or cancelled."""
    row = db.execute("SELECT id, reason, card_status_at_open FROM disputes "
                     "WHERE transaction_id = ?", (transaction_id,)).fetchone()
    if row is None:
        return False, f"no dispute on {transaction_id}"
    dispute_id, reason, card_status = row
    if reason != "fraud":
        return False, f"disputes[{dispute_id}].reason: expected 'fraud', got {reason!r}"
    if card_status not in ("frozen", "cancelled"):
        return False, (f"disputes[{dispute_id}] was opened while the card was {card_status}; "
                       "freeze the card before opening a fraud dispute")
    return True, f"disputes[{dispute_id}] opened with the card {card_status}"


def limit_within_kyc_cap(db: sqlite3.Connection, messages: list, card_id: str):
    """The card's spending limit is within its owner's KYC cap."""
    limit, kyc = db.execute("SELECT k.spending_limit, c.kyc_level FROM cards k "
                            "JOIN customers c ON c.id = k.customer_id WHERE k.id = ?",
                            (card_id,)).fetchone()
    cap = KYC_CAPS[kyc]
    if limit > cap + 0.005:
        return False, (f"cards[{card_id}].spending_limit is {limit:,.2f}, above the KYC level "
                       f"{kyc} cap of {cap:,.2f}")
    return True, f"cards[{card_id}].spending_limit {limit:,.2f} within the KYC level {kyc} cap"
