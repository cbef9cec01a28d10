"""Deterministic seed for retail: ~4,000 customers, ~12,000 orders, ~5 MB.

endstate calls build(db, rng) once with rng = random.Random(0) and caches the result by the digest
of this file and schema.sql; change either and the seed is rebuilt.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from endstate.api import insert_rows

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


@dataclass
class Rows:
    """The rows drawn customer by customer, inserted once all customers are drawn."""
    customers: list[tuple] = field(default_factory=list)
    methods: list[tuple] = field(default_factory=list)
    orders: list[tuple] = field(default_factory=list)
    items: list[tuple] = field(default_factory=list)
    returns: list[tuple] = field(default_factory=list)
    refunds: list[tuple] = field(default_factory=list)


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    products = _products(rng)
    insert_rows(db, products=products)
    rows = Rows()
    for c in range(1, 4001):
        cid, address = _customer(rng, rows, c)
        own = _payment_methods(rng, rows, cid)
        for _ in range(rng.randint(1, 5)):
            _order(rng, rows, products, cid, address, own)
    insert_rows(db, customers=rows.customers, payment_methods=rows.methods, orders=rows.orders,
                order_items=rows.items, returns=rows.returns)
    db.executemany("UPDATE order_items SET status = 'returned' WHERE order_id = ? AND line = ?",
                   [(r[1], r[2]) for r in rows.returns if r[5] == "received"])
    db.executemany("UPDATE order_items SET status = 'return_requested' WHERE order_id = ? AND line = ?",
                   [(r[1], r[2]) for r in rows.returns if r[5] == "requested"])
    insert_rows(db, refunds=rows.refunds)


def _products(rng: random.Random) -> list[tuple]:
    products = []
    for i in range(1, 401):
        category = rng.choice(sorted(CATEGORIES))
        name = f"{rng.choice(CATEGORIES[category])} ({rng.choice(VARIANTS)})"
        products.append((f"P{i:04d}", name, category, round(rng.uniform(9, 400), 2),
                         rng.randint(0, 200)))
    return products


def _customer(rng: random.Random, rows: Rows, c: int) -> tuple[str, str]:
    """Customer number c; returns (id, address)."""
    cid = f"C{c:04d}"
    first, last = rng.choice(FIRST), rng.choice(LAST)
    city, state, zip3 = rng.choice(CITIES)
    zip_code = f"{zip3}{rng.randint(0, 99):02d}"
    address = f"{rng.randint(1, 9999)} {rng.choice(STREETS)} St, {city}, {state} {zip_code}"
    rows.customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.com".lower(),
                           f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}", address,
                           zip_code, "gold" if rng.random() < 0.15 else "regular",
                           _ts(NOW - timedelta(days=rng.randint(30, 2000)))))
    return cid, address


def _payment_methods(rng: random.Random, rows: Rows, cid: str) -> list[str]:
    """One or two methods of the customer; returns their ids."""
    own = []
    for _ in range(rng.choice((1, 1, 2))):
        pm = f"PM{len(rows.methods) + 1:05d}"
        kind = rng.choice(("card", "card", "paypal", "gift_card"))
        last4 = f"{rng.randint(0, 9999):04d}" if kind == "card" else None
        balance = round(rng.uniform(0, 300), 2) if kind == "gift_card" else None
        rows.methods.append((pm, cid, kind, last4, balance))
        own.append(pm)
    return own


def _order(rng: random.Random, rows: Rows, products: list[tuple], cid: str, address: str,
           own: list[str]) -> None:
    """An order placed in the last 120 days, its status following its age; a few delivered ones
    have a return."""
    oid = f"W{10001 + len(rows.orders)}"
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
        rows.items.append((oid, line, p[0], qty, p[3], "ordered"))
        total += qty * p[3]
    method = rng.choice(own)
    rows.orders.append((oid, cid, status, _ts(placed), shipped, delivered, address, method,
                        round(total, 2), "no_longer_needed" if status == "cancelled" else None,
                        _ts(placed)))
    if status == "delivered" and rng.random() < 0.08:
        _return(rng, rows, oid, placed, method)


def _return(rng: random.Random, rows: Rows, oid: str, placed: datetime, method: str) -> None:
    """A return of the order's last line, received or only requested; most received ones are
    refunded to the order's payment method."""
    line = rows.items[-1]
    rid = f"RT{len(rows.returns) + 1:05d}"
    received = rng.random() < 0.6
    rows.returns.append((rid, oid, line[1], 1, "defective",
                         "received" if received else "requested", _ts(placed + timedelta(days=9)),
                         _ts(placed + timedelta(days=14)) if received else None))
    if received and rng.random() < 0.7:
        rows.refunds.append((f"RF{len(rows.refunds) + 1:05d}", oid, rid, line[4], method,
                             _ts(placed + timedelta(days=15))))
