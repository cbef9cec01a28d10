"""Deterministic seed for bank, an app-only neobank: 2,500 customers, ~4,000 accounts, ~3,300
physical and ~900 virtual cards, ~45,000 transactions, a few hundred disputes, transfers, limit
requests and travel notices, ~1,000 payees with their instant transfers, and ~1,000 savings pots
with the money moved in and out of them.

endstate calls build(db, rng) once with a seeded rng and caches the result by the digest of this
file and schema.sql; change either and the seed is rebuilt. Money is REAL dollars, 2 decimals.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from endstate.api import insert_rows

FIRST = ("Adaeze", "Bruno", "Camille", "Dmitri", "Esther", "Felipe", "Greta", "Hassan", "Ingrid",
         "Joaquin", "Kavya", "Lucas", "Mei", "Nadia", "Omar", "Priya", "Quentin", "Rania",
         "Stefan", "Thea", "Ulla", "Viktor", "Wanjiru", "Xiomara", "Yusuf", "Zelda", "Anders",
         "Beatriz", "Cyrus", "Dagny")
LAST = ("Abara", "Bergstrom", "Castillo", "Dimitriou", "Eriksen", "Fontaine", "Gallo", "Horvath",
        "Iyer", "Jablonski", "Kaur", "Lindgren", "Moreau", "Nakamura", "Oyelaran", "Petrov",
        "Quispe", "Reyes", "Sorensen", "Tanaka")
ZIP3 = ("100", "191", "303", "441", "554", "606", "752", "850", "941", "980")
MERCHANTS = {  # merchant: (low, high) typical purchase amount
    "FreshCart Grocery": (12, 180), "Metro Fuel": (25, 90), "Brightline Pharmacy": (6, 70),
    "Corner Bistro": (14, 85), "StreamBox": (9.99, 19.99), "CloudNest Storage": (2.99, 9.99),
    "Urban Outfitters Co": (30, 220), "TechHub Electronics": (40, 1400), "SkyWays Air": (120, 900),
    "Harbor Hotel": (140, 620), "QuickRide": (8, 45), "PetPals": (15, 120),
    "HomeWorks Hardware": (10, 400), "Daily Grind Coffee": (3.5, 14), "Cinema Nine": (12, 48),
    "GreenLeaf Market": (9, 150), "BookNook": (8, 75), "FitLife Gym": (29, 79),
    "City Utilities": (45, 210), "Lumen Mobile": (35, 95),
}
MERCHANT_NAMES = sorted(MERCHANTS)
KYC_SPENDING = {1: (500.0, 1000.0), 2: (1000.0, 2000.0, 3000.0), 3: (2000.0, 5000.0, 10000.0)}
KYC_TRANSFER = {1: (1000.0, 2000.0), 2: (2500.0, 5000.0), 3: (5000.0, 10000.0, 25000.0)}
PAYEES = ("Ana Ruiz", "Ben Okafor", "Chloe Martin", "Dev Patel", "Eva Novak", "Finn Byrne",
          "Grace Lim", "Hugo Silva", "Iris Bauer", "Jonah Weiss", "Kemi Adeyemi", "Lars Holm")
BANKS = ("Chase", "Wells Fargo", "Monzo", "Revolut", "Chime", "Ally", "Citi")
POTS = ("Holiday", "Rainy day", "New laptop", "Rent buffer", "Wedding", "Car repairs", "Taxes")
NOW = datetime(2026, 1, 15, 12, 0, 0)


def _ts(t: datetime) -> str:
    return t.isoformat(timespec="seconds")  # YYYY-MM-DDTHH:MM:SS, faster than strftime


@dataclass
class Rows:
    """The rows drawn customer by customer, inserted once all customers are drawn."""
    customers: list[tuple] = field(default_factory=list)
    accounts: list[tuple] = field(default_factory=list)
    cards: list[tuple] = field(default_factory=list)
    txs: list[list] = field(default_factory=list)
    disputes: list[tuple] = field(default_factory=list)
    transfers: list[tuple] = field(default_factory=list)
    requests: list[tuple] = field(default_factory=list)
    notices: list[tuple] = field(default_factory=list)
    payees: list[tuple] = field(default_factory=list)
    instant: list[tuple] = field(default_factory=list)
    pots: list[tuple] = field(default_factory=list)
    movements: list[tuple] = field(default_factory=list)


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    rows = Rows()
    for c in range(1, 2501):
        cid, kyc, since = _customer(rng, rows, c)
        kinds = ["checking"] + (["savings"] if rng.random() < 0.5 else []) + \
                (["checking"] if rng.random() < 0.1 else [])
        own = [_account(rng, rows, cid, kind, kyc, since) for kind in kinds]
        if len(own) > 1 and rng.random() < 0.6:
            _transfers(rng, rows, own)
    _app(random.Random(rng.getrandbits(64)), rows)  # drawn after, so the rows above stay as they were
    insert_rows(db, customers=rows.customers, accounts=rows.accounts, cards=rows.cards,
                transactions=rows.txs, disputes=rows.disputes, transfers=rows.transfers,
                limit_requests=rows.requests, travel_notices=rows.notices, payees=rows.payees,
                instant_transfers=rows.instant, pots=rows.pots, pot_movements=rows.movements)


def _customer(rng: random.Random, rows: Rows, c: int) -> tuple[str, int, datetime]:
    """Customer number c; returns (id, KYC level, customer since)."""
    cid = f"C{c:04d}"
    first, last = rng.choice(FIRST), rng.choice(LAST)
    kyc = rng.choices((1, 2, 3), (3, 5, 2))[0]
    since = NOW - timedelta(days=rng.randint(60, 3000))
    rows.customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.net".lower(),
                           f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                           f"{rng.choice(ZIP3)}{rng.randint(0, 99):02d}", kyc, _ts(since)))
    return cid, kyc, since


def _account(rng: random.Random, rows: Rows, cid: str, kind: str, kyc: int,
             since: datetime) -> str:
    """An account opened within 30 days of the customer joining; a checking account gets cards,
    purchases and payroll deposits. Returns its id."""
    aid = f"A{len(rows.accounts) + 1:05d}"
    status = "frozen" if rng.random() < 0.02 else "active"
    balance = round(rng.uniform(50, 9000 if kind == "checking" else 40000), 2)
    rows.accounts.append((aid, cid, kind, balance, status, rng.choice(KYC_TRANSFER[kyc]),
                          _ts(since + timedelta(days=rng.randint(0, 30)))))
    if kind == "checking":
        card_ids = _cards(rng, rows, cid, aid, kyc)
        _purchases(rng, rows, aid, card_ids)
        _deposits(rng, rows, aid)
    return aid


def _cards(rng: random.Random, rows: Rows, cid: str, aid: str, kyc: int) -> list[str]:
    """One or two cards on a checking account, a few active ones with a travel notice or a pending
    limit request. Returns their ids."""
    card_ids = []
    for _ in range(rng.choice((1, 1, 1, 2))):
        kid = f"K{len(rows.cards) + 1:05d}"
        status = rng.choices(("active", "frozen", "cancelled"), (90, 6, 4))[0]
        last4, limit = f"{rng.randint(0, 9999):04d}", rng.choice(KYC_SPENDING[kyc])
        rows.cards.append((kid, cid, aid, last4, status, limit,
                           f"{rng.randint(2026, 2030)}-{rng.randint(1, 12):02d}",
                           "lost" if status == "cancelled" else None, None,
                           _ts(NOW - timedelta(days=rng.randint(1, 400))), "physical"))
        card_ids.append(kid)
        if status == "active" and rng.random() < 0.05:
            start = NOW + timedelta(days=rng.randint(-20, 40))
            rows.notices.append((f"TN{len(rows.notices) + 1:05d}", kid,
                                 rng.choice(("France", "Japan", "Mexico", "Italy", "Canada")),
                                 start.date().isoformat(),
                                 (start + timedelta(days=rng.randint(5, 30))).date().isoformat(),
                                 _ts(start - timedelta(days=7))))
        if status == "active" and rng.random() < 0.03:
            rows.requests.append((f"LR{len(rows.requests) + 1:05d}", kid, limit, limit * 2,
                                  "home renovation purchases", "pending",
                                  _ts(NOW - timedelta(days=rng.randint(1, 10)))))
    return card_ids


def _purchases(rng: random.Random, rows: Rows, aid: str, card_ids: list[str]) -> None:
    """Card purchases of the last 120 days; about 1% of the posted ones are disputed."""
    for _ in range(rng.randint(6, 22)):
        merchant = rng.choice(MERCHANT_NAMES)
        low, high = MERCHANTS[merchant]
        when = NOW - timedelta(days=rng.randint(0, 120), minutes=rng.randint(0, 1440))
        tid = f"T{len(rows.txs) + 1:07d}"
        status = "pending" if (NOW - when).days < 2 else "posted"
        rows.txs.append([tid, aid, rng.choice(card_ids), "purchase", merchant,
                         round(rng.uniform(low, high), 2), status, _ts(when)])
        if status == "posted" and rng.random() < 0.012:
            _dispute(rng, rows, rows.txs[-1], when)


def _dispute(rng: random.Random, rows: Rows, tx: list, when: datetime) -> None:
    """A dispute of purchase `tx` (made at `when`), which it marks disputed. Fraud is credited in
    full and found its card frozen, other reasons are credited from $100; disputes opened more than
    30 days ago are resolved."""
    tx[6] = "disputed"
    reason = rng.choice(("fraud", "not_received", "duplicate", "wrong_amount"))
    amount = tx[5]
    credit = amount if reason == "fraud" or amount >= 100 else 0.0
    opened = when + timedelta(days=rng.randint(1, 20))
    rows.disputes.append((f"D{len(rows.disputes) + 1:05d}", tx[0], tx[1], reason, amount,
                          "open" if opened > NOW - timedelta(days=30) else
                          rng.choice(("resolved_customer", "resolved_merchant")), credit,
                          "frozen" if reason == "fraud" else "active", None,
                          _ts(min(opened, NOW))))


def _deposits(rng: random.Random, rows: Rows, aid: str) -> None:
    for _ in range(rng.randint(1, 3)):
        when = NOW - timedelta(days=rng.randint(0, 120), hours=rng.randint(0, 23))
        rows.txs.append([f"T{len(rows.txs) + 1:07d}", aid, None, "deposit", "Payroll ACME Corp",
                         round(rng.uniform(800, 4200), 2), "posted", _ts(when)])


def _transfers(rng: random.Random, rows: Rows, own: list[str]) -> None:
    """One to three transfers between two of the customer's accounts."""
    for _ in range(rng.randint(1, 3)):
        src, dst = rng.sample(own, 2)
        when = NOW - timedelta(days=rng.randint(1, 90), hours=rng.randint(0, 12))
        rows.transfers.append((f"TR{len(rows.transfers) + 1:05d}", src, dst,
                               round(rng.uniform(20, 1500), 2),
                               rng.choice((None, "savings", "rent")), _ts(when)))


def _app(rng: random.Random, rows: Rows) -> None:
    """What customers set up in the app, on their first checking account: virtual cards (within
    their KYC cap, at most three), payees with instant transfers over the last 60 days, and pots
    with the money moved into them (and out of the unlocked ones)."""
    kyc = {c[0]: c[5] for c in rows.customers}
    first: dict[str, str] = {}
    for a in rows.accounts:
        if a[2] == "checking" and a[4] == "active":
            first.setdefault(a[1], a[0])
    for cid, aid in first.items():
        if rng.random() < 0.28:
            for _ in range(rng.choice((1, 1, 2, 3))):
                rows.cards.append((f"K{len(rows.cards) + 1:05d}", cid, aid,
                                   f"{rng.randint(0, 9999):04d}", "active",
                                   rng.choice(KYC_SPENDING[kyc[cid]][:2]), "2029-12", None, None,
                                   _ts(NOW - timedelta(days=rng.randint(1, 300))), "virtual"))
        if rng.random() < 0.25:
            _payees(rng, rows, cid, aid)
        if rng.random() < 0.3:
            _pots(rng, rows, aid)


def _payees(rng: random.Random, rows: Rows, cid: str, aid: str) -> None:
    for name in rng.sample(PAYEES, rng.choice((1, 1, 2))):
        pid = f"PE{len(rows.payees) + 1:05d}"
        added = NOW - timedelta(days=rng.randint(20, 500))
        rows.payees.append((pid, cid, name, f"{rng.randint(10**9, 10**10 - 1)}",
                            rng.choice(BANKS), _ts(added)))
        for _ in range(rng.randint(0, 4)):
            rows.instant.append((f"IT{len(rows.instant) + 1:05d}", aid, pid,
                                 round(rng.uniform(10, 400), 2),
                                 rng.choice((None, "dinner", "rent share", "tickets", "gift")),
                                 _ts(NOW - timedelta(days=rng.randint(1, 60),
                                                     hours=rng.randint(0, 12)))))


def _pots(rng: random.Random, rows: Rows, aid: str) -> None:
    for name in rng.sample(POTS, rng.choice((1, 1, 2))):
        pid = f"PT{len(rows.pots) + 1:05d}"
        opened = NOW - timedelta(days=rng.randint(30, 400))
        locked = (NOW + timedelta(days=rng.randint(10, 200))).date().isoformat() \
            if rng.random() < 0.25 else None
        balance = 0.0
        for _ in range(rng.randint(1, 4)):
            amount = round(rng.choice((25, 50, 100, 200, 500)) * 1.0, 2)
            balance += amount
            rows.movements.append((f"PM{len(rows.movements) + 1:05d}", pid, "in", amount,
                                   _ts(opened + timedelta(days=rng.randint(0, 25)))))
        if locked is None and balance > 100 and rng.random() < 0.3:
            rows.movements.append((f"PM{len(rows.movements) + 1:05d}", pid, "out", 50.0,
                                   _ts(opened + timedelta(days=27))))
            balance -= 50
        rows.pots.append((pid, aid, name, round(balance, 2),
                          rng.choice((None, 1000.0, 2500.0, 5000.0)), locked, "open",
                          _ts(opened)))
