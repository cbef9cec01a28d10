"""The entities the consulting templates (consulting.py, consulting_billing.py) sample into a
task's Scene: employees, a client and its rate card, an engagement with its manager and partner,
assignments, time entries, invoices and approvals in the reserved train id range, and the few
pieces of a task every template shares.
"""

from __future__ import annotations

from datetime import date, timedelta
from itertools import count

import taskgen
from taskgen import call

_seed = taskgen.domain_seed("consulting")
STANDARD, TASKS, TOPICS = _seed.STANDARD, _seed.TASKS, _seed.TOPICS
LARGE_INVOICE = _seed.LARGE_INVOICE
TODAY = _seed.TODAY  # Monday 2026-03-16, the consulting domain's fixed clock
PRACTICES = _seed.PRACTICES

# Names the seed never uses (nor the bench), so a full name finds one employee.
FIRST = ("Adaeze", "Bruno", "Camila", "Dmitri", "Esme", "Fatima", "Gustavo", "Helga", "Ikaika",
         "Joaquin", "Kalani", "Leona", "Mirela", "Nikolai", "Orla", "Priyanka", "Rafael",
         "Saoirse", "Tobias", "Ulla", "Valentina", "Wiremu", "Ximena", "Yusra", "Zoltan")
LAST = ("Abernathy", "Baptiste", "Castellano", "Dragomir", "Eriksen", "Fontaine", "Gallagher",
        "Halvorsen", "Iwasaki", "Jankowski", "Kaur", "Lindgren", "Moreau", "Nakamura", "Oyelaran",
        "Petrov", "Quintero", "Rasmussen")
CLIENTS = ("Ashgrove Mills", "Bellwether Freight", "Corrigan Dairy", "Dovetail Insurance",
           "Emberline Power", "Fairhaven Clinics", "Glasswing Software", "Holloway Brewing",
           "Ironbark Mining", "Juniper Telecom", "Kestrel Airlines", "Lumen Pharmacies")


class Ids:
    """Train-range ids, unique across the whole file, and the variant each template draws next:
    templates take their variants in turn, so every variant gets its share of the file."""

    def __init__(self):
        self._n = {prefix: count(start) for prefix, start in (
            ("E", 8001), ("K", 8001), ("EN", 8001), ("AS", 80001), ("TE", 800001),
            ("IN", 80001), ("AP", 80001))}
        self._turn: dict[str, int] = {}

    def next(self, prefix: str) -> str:
        return f"{prefix}{next(self._n[prefix])}"

    def variant(self, template: str, options: tuple[str, ...]) -> str:
        k = self._turn.get(template, 0)
        self._turn[template] = k + 1
        return options[k % len(options)]


class Scene(taskgen.Scene):
    """The rows of one consulting task. A client keeps its `rates` (level -> card rate) and an
    engagement its `client` (and, in consulting_billing.py, its practice as `area`), for the
    templates' use; the task's init leaves them out."""

    HELPER_KEYS = ("rates", "client", "area")

    def employee(self, level: str, practice: str, capacity: float = 40.0) -> dict:
        rng, taken = self.rng, {e["name"] for e in self.init.get("employees", [])}
        first, last = rng.choice(FIRST), rng.choice(LAST)
        while f"{first} {last}" in taken:  # a full name finds one employee
            first, last = rng.choice(FIRST), rng.choice(LAST)
        eid = self.ids.next("E")
        return self.add("employees", {
            "id": eid, "name": f"{first} {last}",
            "email": f"{first}.{last}.{eid[1:]}@alderfinch.example".lower(), "level": level,
            "practice": practice, "weekly_capacity": capacity})

    def client(self, discount: float | None = None) -> dict:
        """A client on the standard card, or on its own card `discount` below it."""
        rng, cid = self.rng, self.ids.next("K")
        name = rng.choice(CLIENTS)
        card, rates = "standard", dict(STANDARD)
        if discount:
            card = f"RC-{cid}"
            rates = {lvl: float(round(r * (1 - discount) / 5) * 5) for lvl, r in STANDARD.items()}
            for lvl, r in rates.items():
                self.add("rate_cards", {"rate_card": card, "level": lvl, "hourly_rate": r})
        client = self.add("clients", {
            "id": cid, "name": name, "industry": "manufacturing",
            "billing_email": f"ap.{cid.lower()}@client.example", "payment_terms_days": 30,
            "rate_card": card})
        client["rates"] = rates
        return client

    def engagement(self, practice: str, budget: float = 400000.0,
                   discount: float | None = None) -> dict:
        """An active engagement of a new client, with its manager and partner."""
        client = self.client(discount if discount is not None else
                             self.rng.choice((None, None, 0.1)))
        manager = self.employee("manager", practice)
        partner = self.employee("partner", practice)
        start = TODAY - timedelta(weeks=self.rng.randint(4, 14))
        engagement = self.add("engagements", {
            "id": self.ids.next("EN"), "client_id": client["id"],
            "name": self.rng.choice(TOPICS).capitalize(), "status": "active",
            "start_date": start.isoformat(),
            "end_date": (start + timedelta(weeks=26, days=4)).isoformat(), "budget": budget,
            "manager_id": manager["id"], "partner_id": partner["id"]})
        engagement["client"] = client
        return engagement

    def assign(self, engagement: dict, person: dict, hours: float, start: date | None = None,
               end: date | None = None, rate: float | None = None) -> dict:
        return self.add("assignments", {
            "id": self.ids.next("AS"), "engagement_id": engagement["id"],
            "employee_id": person["id"], "hours_per_week": hours,
            "start_date": (start or date.fromisoformat(engagement["start_date"])).isoformat(),
            "end_date": (end or date.fromisoformat(engagement["end_date"])).isoformat(),
            "bill_rate": rate if rate is not None else engagement["client"]["rates"][person["level"]],
            "created_at": f"{engagement['start_date']}T09:00:00"})

    def entry(self, engagement: dict, person: dict, day: date, hours: float, status: str,
              approver: dict | None = None) -> dict:
        return self.add("time_entries", {
            "id": self.ids.next("TE"), "employee_id": person["id"],
            "engagement_id": engagement["id"], "work_date": day.isoformat(), "hours": hours,
            "description": self.rng.choice(TASKS), "status": status,
            "approved_by": approver and approver["id"], "invoice_id": None, "note": None,
            "updated_at": f"{day.isoformat()}T18:00:00"})

    def invoice(self, engagement: dict, amount: float, status: str = "draft") -> dict:
        return self.add("invoices", {
            "id": self.ids.next("IN"), "engagement_id": engagement["id"], "amount": amount,
            "status": status, "created_at": "2026-03-13T16:00:00",
            "issued_at": None if status == "draft" else "2026-03-13T17:00:00"})

    def approval(self, kind: str, reference: str, amount: float, requested_by: dict,
                 approver: dict, status: str, employee: dict | None = None) -> dict:
        return self.add("approvals", {
            "id": self.ids.next("AP"), "kind": kind, "reference": reference,
            "employee_id": employee and employee["id"], "amount": amount,
            "requested_by": requested_by["id"], "approver_id": approver["id"],
            "note": "requested last week", "status": status, "created_at": "2026-03-11T10:00:00",
            "decided_at": None if status == "pending" else "2026-03-12T15:00:00"})

    def manager_of(self, engagement: dict) -> dict:
        return self._row("employees", engagement["manager_id"])

    def partner_of(self, engagement: dict) -> dict:
        return self._row("employees", engagement["partner_id"])

    def _row(self, table: str, key: str) -> dict:
        return next(r for r in self.init[table] if r["id"] == key)


def workdays(first: date, n: int) -> list[date]:
    """n working days from `first` on."""
    days, day = [], first
    while len(days) < n:
        if day.weekday() < 5:
            days.append(day)
        day += timedelta(days=1)
    return days


def identify(s: Scene, person: dict) -> tuple[str, dict]:
    """What the user says to be identified, and the gold lookup (work email, or full name)."""
    if s.rng.random() < 0.75:
        return f"It's {person['email']}.", call("find_employee", email=person["email"])
    return f"This is {person['name']}.", call("find_employee", name=person["name"])


def who(person: dict, role: str) -> str:
    return f"You are {person['name']} ({person['email']}), {role} at Alder & Finch."
