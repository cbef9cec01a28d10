"""The entities the support templates (support.py) sample into a task's Scene: customers,
shipments, carrier exceptions and tickets in the reserved train id range, and how the user
identifies themselves.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import count

import taskgen
from taskgen import call, ts

NOW = datetime(2026, 1, 15, 12, 0, 0)  # the support domain's fixed clock

# Names neither the seed nor the bench uses, so a name and zip identify one customer.
FIRST = ("Adaeze", "Bruno", "Camila", "Dmitri", "Esme", "Fatima", "Gustavo", "Helga", "Ikaika",
         "Joaquin", "Kalani", "Leona", "Mirela", "Nikolai", "Orla", "Priyanka", "Rafael", "Saoirse",
         "Tobias", "Ulla", "Valentina", "Wiremu", "Ximena", "Yusra", "Zoltan")
LAST = ("Abernathy", "Baptiste", "Castellano", "Dragomir", "Eriksen", "Fontaine", "Gallagher",
        "Halvorsen", "Iwasaki", "Jankowski", "Kaur", "Lindgren", "Moreau", "Nakamura", "Oyelaran",
        "Petrov", "Quintero", "Rasmussen")
ZIPS = ("27604", "37211", "44102", "53711", "64111", "78745", "80219", "85016", "97214", "98115")
MAIL_HOSTS = ("mailbox.example", "inbox.example", "post.example")
HUBS = ("Louisville, KY", "Memphis, TN", "Indianapolis, IN", "Ontario, CA", "Dallas, TX",
        "Atlanta, GA", "Chicago, IL", "Newark, NJ", "Salt Lake City, UT", "Columbus, OH")
CARRIERS = ("UPS", "FedEx", "USPS", "DHL")
ITEMS = ("bookshelf", "coffee grinder", "floor lamp", "monitor", "rice cooker", "guitar amp",
         "office chair", "vase", "air purifier", "bike helmet", "standing desk", "dinner set")
AGENTS = {"general": "AG001", "shipping": "AG009", "billing": "AG021", "returns": "AG029"}


# -- rows ---------------------------------------------------------------------------------------

class Ids:
    """Train-range ids, unique across the whole file."""

    def __init__(self):
        self._customer, self._shipment, self._ticket = count(8001), count(80001), count(80001)
        self._exception = count(80001)

    def customer(self): return f"C{next(self._customer)}"
    def shipment(self): return f"S{next(self._shipment)}"
    def ticket(self): return f"T{next(self._ticket)}"
    def exception(self): return f"X{next(self._exception)}"


class Scene(taskgen.Scene):
    """The rows of one support task."""

    def customer(self, tier: str | None = None) -> dict:
        rng = self.rng
        first, last, cid = rng.choice(FIRST), rng.choice(LAST), self.ids.customer()
        return self.add("customers", {
            "id": cid, "name": f"{first} {last}",
            "email": f"{first}.{last}.{cid[1:]}@{rng.choice(MAIL_HOSTS)}".lower(),
            "phone": f"555-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}", "zip": rng.choice(ZIPS),
            "tier": tier or rng.choice(("standard", "standard", "plus", "premier")),
            "created_at": ts(NOW - timedelta(days=rng.randint(60, 1500)))})

    def shipment(self, c: dict, status: str, scan_days_ago: int | None = None) -> dict:
        """A shipment in transit (last scanned `scan_days_ago` days ago) or delivered."""
        rng, sid = self.rng, self.ids.shipment()
        carrier = rng.choice(CARRIERS)
        scan = NOW - timedelta(days=scan_days_ago if scan_days_ago is not None else rng.randint(1, 4),
                               hours=rng.randint(1, 9))
        shipped = scan - timedelta(days=rng.randint(1, 3), hours=rng.randint(0, 12))
        return self.add("shipments", {
            "id": sid, "customer_id": c["id"], "order_ref": f"ORD-8{sid[1:]}", "carrier": carrier,
            "tracking_number": tracking(carrier, sid), "service": rng.choice(("ground", "express")),
            "status": status, "declared_value": round(rng.uniform(30, 450), 2),
            "shipped_at": ts(shipped), "last_scan_at": ts(scan), "last_scan_location": rng.choice(HUBS),
            "delivered_at": ts(scan) if status == "delivered" else None})

    def exception(self, shipment: dict, kind: str, status: str = "open",
                  resolution: str | None = None) -> dict:
        wait = timedelta(days=5) if kind == "lost" else timedelta()  # policy: lost after 5 quiet days
        opened = datetime.fromisoformat(shipment["last_scan_at"]) + wait + timedelta(hours=self.rng.randint(2, 20))
        opened = min(opened, NOW - timedelta(hours=1))
        return self.add("carrier_exceptions", {
            "id": self.ids.exception(), "shipment_id": shipment["id"], "kind": kind, "status": status,
            "opened_by": self.rng.choice(("carrier", "support")), "opened_at": ts(opened),
            "resolved_at": ts(opened + timedelta(days=2)) if status == "resolved" else None,
            "resolution": resolution})

    def ticket(self, c: dict, subject: str, category: str, status: str = "open",
               priority: str = "normal", queue: str = "shipping", shipment: dict | None = None) -> dict:
        """A ticket opened a day or two after its shipment left (or in the last week)."""
        if shipment:
            created = datetime.fromisoformat(shipment["shipped_at"]) + timedelta(hours=self.rng.randint(20, 60))
            created = min(created, NOW - timedelta(hours=self.rng.randint(1, 5)))
        else:
            created = NOW - timedelta(days=self.rng.randint(1, 6), hours=self.rng.randint(1, 9))
        return self.add("tickets", {
            "id": self.ids.ticket(), "customer_id": c["id"],
            "shipment_id": shipment["id"] if shipment else None, "subject": subject,
            "category": category, "priority": priority, "status": status, "queue": queue,
            "assignee": None if status == "new" else AGENTS[queue], "created_at": ts(created),
            "updated_at": ts(created), "resolved_at": None, "resolution": None})

    def old_exception(self, c: dict) -> dict:
        """An earlier, settled delay on another shipment: fixes the id the next exception gets."""
        old = self.shipment(c, "delivered", scan_days_ago=self.rng.randint(40, 90))
        return self.exception(old, "delayed", "resolved", "delivered")


def tracking(carrier: str, sid: str) -> str:
    n = int(sid[1:])
    return {"UPS": f"1Z800E52{n:010d}", "FedEx": f"78{n:010d}", "USPS": f"94008000{n:014d}",
            "DHL": f"JD8{n:09d}"}[carrier]


def identify(s: Scene, c: dict) -> tuple[str, dict]:
    """What the user says to be identified, and the gold lookup for it (email, or name and zip)."""
    if s.rng.random() < 0.7:
        return f"It's {c['email']}.", call("find_customer", email=c["email"])
    return (f"I'm {c['name']}, zip {c['zip']}.", call("find_customer", name=c["name"], zip=c["zip"]))


def who(c: dict) -> str:
    return f"You are {c['name']} (email {c['email']}, zip {c['zip']})."


def high_for(c: dict) -> str:
    return "urgent" if c["tier"] == "premier" else "high"


def day(t: str | datetime) -> str:
    return (datetime.fromisoformat(t) if isinstance(t, str) else t).strftime("%Y-%m-%d")
