"""Deterministic seed for support: 3,000 customers, ~7,500 shipments, ~3,100 tickets, ~4 MB.

endstate calls build(db, rng) once with rng = random.Random(0) and caches the result by the digest
of this file and schema.sql; change either and the seed is rebuilt.

The seed follows the policy it ships with: every ticket whose shipment has an open carrier
exception is `pending` (never `resolved`), every claim belongs to a lost or damaged exception, and
no ticket carries more than one credit or a credit above its customer's tier cap.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from endstate.api import insert_rows

FIRST = ("Ava", "Ben", "Chloe", "Daniel", "Elena", "Farid", "Grace", "Hiro", "Isabel", "Jamal",
         "Keiko", "Liam", "Maya", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sam", "Tara", "Umar",
         "Vera", "Wen", "Xavier", "Yara", "Zoe", "Amir", "Bianca", "Carlos", "Dina")
LAST = ("Smith", "Garcia", "Chen", "Okafor", "Novak", "Rossi", "Kim", "Silva", "Patel", "Meyer",
        "Haddad", "Ito", "Kowalski", "Dubois", "Nguyen", "Larsen", "Costa", "Schmidt", "Ahmed",
        "Murphy")
ZIP3 = ("627", "972", "787", "537", "802", "276", "100", "606", "941", "331")
HUBS = ("Louisville, KY", "Memphis, TN", "Indianapolis, IN", "Ontario, CA", "Dallas, TX",
        "Atlanta, GA", "Chicago, IL", "Newark, NJ", "Salt Lake City, UT", "Columbus, OH")
QUEUES = (("general", "General", "Account and other questions"),
          ("shipping", "Shipping", "Tracking, delays, lost and damaged shipments"),
          ("billing", "Billing", "Charges, invoices and credits"),
          ("returns", "Returns", "Returns and exchanges"),
          ("escalations", "Escalations", "Cases handed to a senior human agent"))
TIER_CAP = {"standard": 25.0, "plus": 50.0, "premier": 100.0}  # same caps as policy.md
SUBJECTS = {
    "shipping": ("Where is my package?", "Tracking has not updated", "Delivery is late",
                 "Package shows delivered but not here"),
    "damaged": ("Item arrived broken", "Box crushed, contents damaged", "Cracked on arrival"),
    "billing": ("Charged twice", "Invoice request", "Wrong amount charged", "Promo code not applied"),
    "returns": ("How do I return this?", "Return label not working", "Exchange for another size"),
    "account": ("Cannot log in", "Change my email", "Delete my account"),
    "other": ("Question about a product", "Feedback on delivery", "Gift wrapping question"),
}
CATEGORY_QUEUE = {"shipping": "shipping", "damaged": "shipping", "billing": "billing",
                  "returns": "returns", "account": "general", "other": "general"}
NOW = datetime(2026, 1, 15, 12, 0, 0)


def _ts(t: datetime | None) -> str | None:
    return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%S")


def _tracking(rng: random.Random, carrier: str, n: int) -> str:
    if carrier == "UPS":
        return f"1Z{rng.randint(100, 999)}E{rng.randint(10, 99)}{n:010d}"
    if carrier == "FedEx":
        return f"7{rng.randint(100, 999)}{n:08d}"
    if carrier == "USPS":
        return f"9400{rng.randint(100000, 999999)}{n:012d}"
    return f"JD{rng.randint(10, 99)}{n:08d}"


def _shipment(rng: random.Random, sid: str, cid: str, n: int) -> tuple:
    carrier = rng.choice(("UPS", "UPS", "FedEx", "USPS", "DHL"))
    age = rng.randint(0, 90)
    shipped = NOW - timedelta(days=age, hours=rng.randint(0, 20))
    hub = rng.choice(HUBS)
    if age == 0:
        status, last_scan, delivered = "label_created", None, None
    elif age <= 4 or (age <= 12 and rng.random() < 0.15):
        status = "out_for_delivery" if age >= 2 and rng.random() < 0.2 else "in_transit"
        last_scan = min(shipped + timedelta(days=rng.randint(0, min(age, 3)), hours=6), NOW)
        delivered = None
    elif rng.random() < 0.02:
        status, last_scan, delivered = "returned", shipped + timedelta(days=9), None
    else:
        status = "delivered"
        delivered = shipped + timedelta(days=rng.randint(2, 5), hours=3)
        last_scan = delivered
    return (sid, cid, f"ORD-{500000 + n}", carrier, _tracking(rng, carrier, n),
            rng.choice(("ground", "ground", "express")), status, round(rng.uniform(12, 600), 2),
            _ts(shipped) if status != "label_created" else None, _ts(last_scan),
            hub if last_scan else None, _ts(delivered))


def _exception(rng: random.Random, shipment: tuple) -> tuple[str, str, str | None] | None:
    """(kind, status, resolution) of the shipment's carrier exception, if it has one."""
    status, shipped, last_scan = shipment[6], shipment[8], shipment[9]
    if status in ("in_transit", "out_for_delivery"):
        stale = last_scan and NOW - datetime.fromisoformat(last_scan) >= timedelta(days=5)
        if stale and rng.random() < 0.7:
            return rng.choice(("lost", "delayed")), "open", None
        if rng.random() < 0.04:
            return "address_issue", "open", None
        return None
    if status == "delivered" and rng.random() < 0.10:
        kind = rng.choice(("damaged", "damaged", "delayed", "lost", "address_issue"))
        if NOW - datetime.fromisoformat(shipped) < timedelta(days=12) and rng.random() < 0.5:
            return kind, "open", None
        resolution = {"damaged": rng.choice(("claim_paid", "reshipped")), "lost": "delivered",
                      "delayed": "delivered", "address_issue": "delivered"}[kind]
        return kind, "resolved", resolution
    return None


def _resolution_text(exc: tuple | None) -> str:
    if exc is None:
        return "Answered the customer's question."
    return {"delivered": "Carrier delivered the package.", "reshipped": "Replacement shipped.",
            "claim_paid": "Carrier claim paid out."}[exc[2]]


@dataclass
class Rows:
    """The rows drawn customer by customer, inserted once all customers are drawn."""
    customers: list[tuple] = field(default_factory=list)
    shipments: list[tuple] = field(default_factory=list)
    exceptions: list[tuple] = field(default_factory=list)
    claims: list[tuple] = field(default_factory=list)
    tickets: list[tuple] = field(default_factory=list)
    notes: list[tuple] = field(default_factory=list)
    credits: list[tuple] = field(default_factory=list)
    escalations: list[tuple] = field(default_factory=list)


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    insert_rows(db, queues=QUEUES)
    agents = _agents(rng)
    insert_rows(db, agents=agents)
    by_queue = {q[0]: [a[0] for a in agents if a[2] == q[0]] for q in QUEUES}
    rows = Rows()
    for c in range(1, 3001):
        cid, tier = _customer(rng, rows, c)
        for _ in range(rng.randint(1, 4)):
            n = len(rows.shipments) + 1
            shipment = _shipment(rng, f"S{n:05d}", cid, n)
            rows.shipments.append(shipment)
            exc = _exception(rng, shipment)
            opened = _add_exception(rng, rows, shipment, exc) if exc else None
            # One ticket per shipment with an exception; others get a ticket now and then.
            if exc or rng.random() <= 0.35:
                _ticket(rng, rows, by_queue, cid, tier, shipment, exc, opened)
    insert_rows(db, customers=rows.customers, shipments=rows.shipments,
                carrier_exceptions=rows.exceptions, claims=rows.claims, tickets=rows.tickets,
                ticket_notes=rows.notes, credits=rows.credits, escalations=rows.escalations)
    db.executemany("UPDATE tickets SET queue = 'escalations', assignee = NULL WHERE id = ?",
                   [(e[1],) for e in rows.escalations])


def _agents(rng: random.Random) -> list[tuple]:
    agents = []
    for queue, size in (("general", 8), ("shipping", 12), ("billing", 8), ("returns", 8),
                        ("escalations", 4)):
        for _ in range(size):
            agents.append((f"AG{len(agents) + 1:03d}", f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                           queue))
    return agents


def _customer(rng: random.Random, rows: Rows, c: int) -> tuple[str, str]:
    """Customer number c; returns (id, tier)."""
    cid = f"C{c:04d}"
    first, last = rng.choice(FIRST), rng.choice(LAST)
    tier = rng.choices(("standard", "plus", "premier"), (70, 20, 10))[0]
    rows.customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.com".lower(),
                           f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                           f"{rng.choice(ZIP3)}{rng.randint(0, 99):02d}", tier,
                           _ts(NOW - timedelta(days=rng.randint(100, 2000)))))
    return cid, tier


def _add_exception(rng: random.Random, rows: Rows, shipment: tuple,
                   exc: tuple[str, str, str | None]) -> datetime:
    """The shipment's carrier exception (kind, status, resolution), opened the day after its last
    scan, and its claim if one was filed. Returns when the exception was opened."""
    kind, status, resolution = exc
    xid = f"X{len(rows.exceptions) + 1:05d}"
    opened = datetime.fromisoformat(shipment[9] or shipment[8]) + timedelta(days=1)
    opened = min(opened, NOW - timedelta(hours=2))
    resolved = opened + timedelta(days=rng.randint(2, 8)) if status == "resolved" else None
    rows.exceptions.append((xid, shipment[0], kind, status, rng.choice(("carrier", "support")),
                            _ts(opened), _ts(resolved), resolution))
    if kind in ("lost", "damaged") and (resolution == "claim_paid" or
                                        (status == "open" and rng.random() < 0.4)):
        paid = resolution == "claim_paid"
        rows.claims.append((f"CL{len(rows.claims) + 1:05d}", xid,
                            round(shipment[7] * rng.choice((1, 1, 0.5)), 2),
                            "paid" if paid else "filed", _ts(opened + timedelta(hours=5)),
                            _ts(resolved) if paid else None))
    return opened


def _ticket(rng: random.Random, rows: Rows, by_queue: dict[str, list[str]], cid: str, tier: str,
            shipment: tuple, exc: tuple | None, opened: datetime | None) -> None:
    """A ticket of the customer with its notes, and now and then a credit or an escalation. A
    ticket about a carrier exception opens with it and stays pending while it is open."""
    if exc:
        category = "damaged" if exc[0] == "damaged" else "shipping"
        status = "pending" if exc[1] == "open" else "resolved"
        created = opened
    else:
        category = rng.choice(sorted(SUBJECTS))
        status = rng.choices(("new", "open", "pending", "resolved"), (8, 10, 6, 76))[0]
        created = NOW - timedelta(days=rng.randint(0, 60), hours=rng.randint(1, 20))
    tid = f"T{len(rows.tickets) + 1:05d}"
    queue = CATEGORY_QUEUE[category]
    priority = ("high" if category == "damaged" or (exc and exc[0] == "lost") else
                rng.choice(("low", "normal", "normal", "normal")))
    if priority == "high" and tier == "premier":
        priority = "urgent"
    assignee = None if status == "new" else rng.choice(by_queue[queue])
    resolved_at = created + timedelta(days=rng.randint(1, 9)) if status == "resolved" else None
    if resolved_at and resolved_at > NOW:
        resolved_at = NOW - timedelta(hours=1)
    updated = resolved_at or created + timedelta(hours=rng.randint(1, 30))
    updated = min(updated, NOW - timedelta(minutes=30))
    subject = rng.choice(SUBJECTS[category])
    rows.tickets.append((tid, cid, shipment[0] if exc or category in ("shipping", "returns")
                         else None, subject, category, priority, status, queue, assignee,
                         _ts(created), _ts(updated), _ts(resolved_at),
                         _resolution_text(exc) if resolved_at else None))
    _note(rows, tid, "customer", "customer", f"Customer wrote in: {subject.lower()}", created)
    if assignee:
        _note(rows, tid, assignee, "internal", "Looked into it, following up.",
              created + timedelta(minutes=40))
    if exc and exc[0] in ("delayed", "lost") and status == "resolved" and rng.random() < 0.3:
        rows.credits.append((f"CR{len(rows.credits) + 1:05d}", cid, tid,
                             rng.choice((5.0, 10.0, 15.0, TIER_CAP[tier])),
                             "delay" if exc[0] == "delayed" else "loss", _ts(resolved_at)))
    if status != "resolved" and rng.random() < 0.01:
        rows.escalations.append((f"E{len(rows.escalations) + 1:05d}", tid,
                                 "Customer asked for a supervisor.", _ts(updated)))


def _note(rows: Rows, tid: str, author: str, visibility: str, body: str, at: datetime) -> None:
    rows.notes.append((f"N{len(rows.notes) + 1:06d}", tid, author, visibility, body, _ts(at)))
