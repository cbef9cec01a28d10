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


INSTANT_CAPS = {1: 500.0, 2: 2500.0, 3: 10000.0}
NEW_PAYEE_CAP = 250.0
NEW_SINCE = "2026-01-14T12:00:00"  # 24 hours before the domain's clock


def instant_transfers_within_limits(db: sqlite3.Connection, messages: list, customer_id: str):
    """Today's instant transfers from the customer's accounts total no more than their KYC
    level's daily instant limit, and a payee added in the last 24 hours got at most $250.00."""
    kyc = db.execute("SELECT kyc_level FROM customers WHERE id = ?", (customer_id,)).fetchone()[0]
    rows = db.execute("SELECT t.amount, p.id, p.created_at FROM instant_transfers t JOIN accounts a "
                      "ON a.id = t.account_id JOIN payees p ON p.id = t.payee_id WHERE "
                      "a.customer_id = ? AND t.created_at >= ?", (customer_id, TODAY)).fetchall()
    sent = round(sum(r[0] for r in rows), 2)
    if sent > INSTANT_CAPS[kyc] + 0.005:
        return False, (f"instant transfers of {customer_id} today total {sent:,.2f}, over the "
                       f"KYC level {kyc} daily limit of {INSTANT_CAPS[kyc]:,.2f}")
    new = {}
    for amount, payee, created in rows:
        if created > NEW_SINCE:
            new[payee] = new.get(payee, 0.0) + amount
    over = {p: a for p, a in new.items() if a > NEW_PAYEE_CAP + 0.005}
    if over:
        payee, amount = next(iter(over.items()))
        return False, (f"payee {payee} was added less than 24 hours ago and got {amount:,.2f}, "
                       f"over the {NEW_PAYEE_CAP:,.2f} cap on new payees")
    return True, f"instant transfers of {customer_id} today total {sent:,.2f}, within the limits"


def pot_lock_respected(db: sqlite3.Connection, messages: list, pot_id: str):
    """No money left the pot, and it is not closed, while it is locked."""
    locked, status = db.execute("SELECT locked_until, status FROM pots WHERE id = ?",
                                (pot_id,)).fetchone()
    if locked is None or locked <= TODAY:
        return True, f"pots[{pot_id}] is not locked"
    out = db.execute("SELECT coalesce(sum(amount), 0) FROM pot_movements WHERE pot_id = ? AND "
                     "direction = 'out' AND created_at >= ?", (pot_id, TODAY)).fetchone()[0]
    if out or status != "open":
        return False, (f"pots[{pot_id}] is locked until {locked}, but {out:,.2f} left it today "
                       f"(status {status})")
    return True, f"pots[{pot_id}] stays locked until {locked}"


def virtual_cards_within_policy(db: sqlite3.Connection, messages: list, customer_id: str):
    """The customer holds at most 3 active or frozen virtual cards, each within the KYC cap."""
    kyc = db.execute("SELECT kyc_level FROM customers WHERE id = ?", (customer_id,)).fetchone()[0]
    cards = db.execute("SELECT id, spending_limit FROM cards WHERE customer_id = ? AND form = "
                       "'virtual' AND status IN ('active', 'frozen') ORDER BY id",
                       (customer_id,)).fetchall()
    if len(cards) > 3:
        return False, f"{customer_id} holds {len(cards)} virtual cards; policy allows 3"
    over = [(k, lim) for k, lim in cards if lim > KYC_CAPS[kyc] + 0.005]
    if over:
        return False, (f"cards[{over[0][0]}].spending_limit {over[0][1]:,.2f} is above the KYC "
                       f"level {kyc} cap of {KYC_CAPS[kyc]:,.2f}")
    return True, f"{customer_id} holds {len(cards)} virtual card(s) within policy"
