"""Deterministic seed for bank: 2,500 customers, ~4,000 accounts, ~3,300 cards, ~45,000
transactions, a few hundred disputes, transfers, limit requests and travel notices.

endstate calls build(db, rng) once with a seeded rng and caches the result by the digest of this
file and schema.sql; change either and the seed is rebuilt. Money is REAL dollars, 2 decimals.
"""

import random
import sqlite3
from datetime import datetime, timedelta

from endstate.core.tools import insert_rows

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
KYC_SPENDING = {1: (500.0, 1000.0), 2: (1000.0, 2000.0, 3000.0), 3: (2000.0, 5000.0, 10000.0)}
KYC_TRANSFER = {1: (1000.0, 2000.0), 2: (2500.0, 5000.0), 3: (5000.0, 10000.0, 25000.0)}
NOW = datetime(2026, 1, 15, 12, 0, 0)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    customers, accounts, cards, txs, disputes, transfers, requests, notices = ([] for _ in range(8))
    for c in range(1, 2501):
        cid = f"C{c:04d}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        kyc = rng.choices((1, 2, 3), (3, 5, 2))[0]
        since = NOW - timedelta(days=rng.randint(60, 3000))
        customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.net".lower(),
                          f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                          f"{rng.choice(ZIP3)}{rng.randint(0, 99):02d}", kyc, _ts(since)))
        kinds = ["checking"] + (["savings"] if rng.random() < 0.5 else []) + \
                (["checking"] if rng.random() < 0.1 else [])
        own = []
        for kind in kinds:
            aid = f"A{len(accounts) + 1:05d}"
            own.append(aid)
            status = "frozen" if rng.random() < 0.02 else "active"
            balance = round(rng.uniform(50, 9000 if kind == "checking" else 40000), 2)
            accounts.append((aid, cid, kind, balance, status, rng.choice(KYC_TRANSFER[kyc]),
                             _ts(since + timedelta(days=rng.randint(0, 30)))))
            if kind != "checking":
                continue
            card_ids = []
            for _ in range(rng.choice((1, 1, 1, 2))):
                kid = f"K{len(cards) + 1:05d}"
                status = rng.choices(("active", "frozen", "cancelled"), (90, 6, 4))[0]
                cards.append((kid, cid, aid, f"{rng.randint(0, 9999):04d}", status,
                              rng.choice(KYC_SPENDING[kyc]),
                              f"{rng.randint(2026, 2030)}-{rng.randint(1, 12):02d}",
                              "lost" if status == "cancelled" else None, None,
                              _ts(NOW - timedelta(days=rng.randint(1, 400)))))
                card_ids.append(kid)
                if status == "active" and rng.random() < 0.05:
                    start = NOW + timedelta(days=rng.randint(-20, 40))
                    notices.append((f"TN{len(notices) + 1:05d}", kid,
                                    rng.choice(("France", "Japan", "Mexico", "Italy", "Canada")),
                                    start.date().isoformat(),
                                    (start + timedelta(days=rng.randint(5, 30))).date().isoformat(),
                                    _ts(start - timedelta(days=7))))
                if status == "active" and rng.random() < 0.03:
                    current = cards[-1][5]
                    requests.append((f"LR{len(requests) + 1:05d}", kid, current, current * 2,
                                     "home renovation purchases", "pending",
                                     _ts(NOW - timedelta(days=rng.randint(1, 10)))))
            for _ in range(rng.randint(6, 22)):
                merchant = rng.choice(sorted(MERCHANTS))
                low, high = MERCHANTS[merchant]
                when = NOW - timedelta(days=rng.randint(0, 120), minutes=rng.randint(0, 1440))
                tid = f"T{len(txs) + 1:07d}"
                status = "pending" if (NOW - when).days < 2 else "posted"
                txs.append([tid, aid, rng.choice(card_ids), "purchase", merchant,
                            round(rng.uniform(low, high), 2), status, _ts(when)])
                if status == "posted" and rng.random() < 0.012:
                    txs[-1][6] = "disputed"
                    reason = rng.choice(("fraud", "not_received", "duplicate", "wrong_amount"))
                    amount = txs[-1][5]
                    credit = amount if reason == "fraud" or amount >= 100 else 0.0
                    opened = when + timedelta(days=rng.randint(1, 20))
                    disputes.append((f"D{len(disputes) + 1:05d}", tid, aid, reason, amount,
                                     "open" if opened > NOW - timedelta(days=30) else
                                     rng.choice(("resolved_customer", "resolved_merchant")), credit,
                                     "frozen" if reason == "fraud" else "active", None,
                                     _ts(min(opened, NOW))))
            for _ in range(rng.randint(1, 3)):
                when = NOW - timedelta(days=rng.randint(0, 120), hours=rng.randint(0, 23))
                txs.append([f"T{len(txs) + 1:07d}", aid, None, "deposit", "Payroll ACME Corp",
                            round(rng.uniform(800, 4200), 2), "posted", _ts(when)])
        if len(own) > 1 and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                src, dst = rng.sample(own, 2)
                when = NOW - timedelta(days=rng.randint(1, 90), hours=rng.randint(0, 12))
                transfers.append((f"TR{len(transfers) + 1:05d}", src, dst,
                                  round(rng.uniform(20, 1500), 2),
                                  rng.choice((None, "savings", "rent")), _ts(when)))
    insert_rows(db, customers=customers, accounts=accounts, cards=cards, transactions=txs,
                disputes=disputes, transfers=transfers, limit_requests=requests,
                travel_notices=notices)
