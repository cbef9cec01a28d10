"""Deterministic seed for retail: ~4,000 customers, ~12,000 orders, ~5 MB.

endstate calls build(db, rng) once with rng = random.Random(0) and caches the result by the digest
of this file and schema.sql; change either and the seed is rebuilt.
"""

import random
import sqlite3
from datetime import datetime, timedelta

from endstate.core.tools import insert_rows

FIRST = ("Ava Ben Chloe Daniel Elena Farid Grace Hiro Isabel Jamal Keiko Liam Maya Noah Olga Pedro "
         "Quinn Rosa Sam Tara Umar Vera Wen Xavier Yara Zoe Amir Bianca Carlos Dina").split()
LAST = ("Smith Garcia Chen Okafor Novak Rossi Kim Silva Patel Meyer Haddad Ito Kowalski Dubois "
        "Nguyen Larsen Costa Schmidt Ahmed Murphy").split()
STREETS = "Oak Pine Maple Cedar Elm Lake Hill River Park Main Mill Bay".split()
CITIES = [("Springfield", "IL", "627"), ("Portland", "OR", "972"), ("Austin", "TX", "787"),
          ("Madison", "WI", "537"), ("Denver", "CO", "802"), ("Raleigh", "NC", "276")]
CATEGORIES = {
    "headphones": ("Wireless Headphones", "Noise-Cancelling Headphones", "Earbuds"),
    "keyboards": ("Mechanical Keyboard", "Wireless Keyboard", "Ergonomic Keyboard"),
    "lamps": ("Desk Lamp", "Floor Lamp", "LED Strip"),
    "backpacks": ("Hiking Backpack", "Laptop Backpack", "Daypack"),
    "kettles": ("Electric Kettle", "Gooseneck Kettle", "Stovetop Kettle"),
    "shoes": ("Running Shoes", "Trail Shoes", "Sneakers"),
    "watches": ("Smart Watch", "Dive Watch", "Fitness Band"),
    "mugs": ("Travel Mug", "Ceramic Mug", "Insulated Tumbler"),
}
VARIANTS = ("black", "white", "blue", "red", "green", "grey", "small", "medium", "large")
NOW = datetime(2026, 1, 15, 12, 0, 0)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    products = []
    for i in range(1, 401):
        category = rng.choice(sorted(CATEGORIES))
        name = f"{rng.choice(CATEGORIES[category])} ({rng.choice(VARIANTS)})"
        products.append((f"P{i:04d}", name, category, round(rng.uniform(9, 400), 2),
                         rng.randint(0, 200)))
    insert_rows(db, products=products)

    customers, methods, orders, items, returns, refunds = [], [], [], [], [], []
    for c in range(1, 4001):
        cid = f"C{c:04d}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        city, state, zip3 = rng.choice(CITIES)
        zip_code = f"{zip3}{rng.randint(0, 99):02d}"
        address = f"{rng.randint(1, 9999)} {rng.choice(STREETS)} St, {city}, {state} {zip_code}"
        customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.com".lower(),
                          f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}", address,
                          zip_code, "gold" if rng.random() < 0.15 else "regular",
                          _ts(NOW - timedelta(days=rng.randint(30, 2000)))))
        own = []
        for _ in range(rng.choice((1, 1, 2))):
            pm = f"PM{len(methods) + 1:05d}"
            kind = rng.choice(("card", "card", "paypal", "gift_card"))
            methods.append((pm, cid, kind, f"{rng.randint(0, 9999):04d}" if kind == "card" else None,
                            round(rng.uniform(0, 300), 2) if kind == "gift_card" else None))
            own.append(pm)
        for _ in range(rng.randint(1, 5)):
            oid = f"W{10001 + len(orders)}"
            placed = NOW - timedelta(days=rng.randint(0, 120), minutes=rng.randint(0, 1440))
            age = (NOW - placed).days
            status = ("pending" if age < 2 else "processing" if age < 4 else "shipped" if age < 8
                      else "delivered")
            if rng.random() < 0.05:
                status = "cancelled"
            shipped = _ts(placed + timedelta(days=3)) if status in ("shipped", "delivered") else None
            delivered = _ts(placed + timedelta(days=7)) if status == "delivered" else None
            total = 0.0
            for line in range(1, rng.choice((1, 1, 2, 2, 3, 4)) + 1):
                p = rng.choice(products)
                qty = rng.choice((1, 1, 1, 2, 3))
                items.append((oid, line, p[0], qty, p[3], "ordered"))
                total += qty * p[3]
            orders.append((oid, cid, status, _ts(placed), shipped, delivered, address,
                           rng.choice(own), round(total, 2),
                           "no_longer_needed" if status == "cancelled" else None,
                           _ts(placed)))
            if status == "delivered" and rng.random() < 0.08:
                line = items[-1]
                rid = f"RT{len(returns) + 1:05d}"
                received = rng.random() < 0.6
                returns.append((rid, oid, line[1], 1, "defective",
                                "received" if received else "requested",
                                _ts(placed + timedelta(days=9)),
                                _ts(placed + timedelta(days=14)) if received else None))
                if received and rng.random() < 0.7:
                    refunds.append((f"RF{len(refunds) + 1:05d}", oid, rid, line[4], orders[-1][7],
                                    _ts(placed + timedelta(days=15))))
    insert_rows(db, customers=customers, payment_methods=methods, orders=orders,
                order_items=items, returns=returns)
    db.executemany("UPDATE order_items SET status = 'returned' WHERE order_id = ? AND line = ?",
                   [(r[1], r[2]) for r in returns if r[5] == "received"])
    db.executemany("UPDATE order_items SET status = 'return_requested' WHERE order_id = ? AND line = ?",
                   [(r[1], r[2]) for r in returns if r[5] == "requested"])
    insert_rows(db, refunds=refunds)
