"""The entities the travel templates (travel.py) sample into a task's Scene: employees and their
managers, hotels priced against the traveller's rate cap, bookings and approval requests in the
reserved train id range, and how dates, money and rooms are written.
"""

from __future__ import annotations

from datetime import date, timedelta
from itertools import count

import taskgen

TODAY = date(2026, 3, 2)  # the travel domain's fixed clock: 2026-03-02T09:00:00
CHECK_IN_HOUR, NOW_HOUR = 15, 9

_seed = taskgen.domain_seed("travel")
CAPS, CITIES = _seed.CAPS, sorted(_seed.CITIES)

# Names neither the seed nor the bench uses.
FIRST = ("Adaeze Bastian Carmen Dariush Elodie Florin Gwen Henrik Ilse Jarrah Kasimir Leonie Matteo "
         "Noor Oona Piet Renske Silas Thea Ugo Veronika Wilma Xavi Yasmin Zeno").split()
LAST = ("Achterberg Bianchi Caldwell Dufresne Engel Falk Gorski Hartmann Iversen Jovanovic Kowalczyk "
        "Lund Mbeki Nakashima Ostrowski Pereira Rautio Stavros Thorsen Uribe Vance Wexler").split()
DEPARTMENTS = ("Sales", "Engineering", "Finance", "Marketing", "Legal", "Operations", "Consulting")
BRANDS = ("Copperleaf", "Driftwood", "Elmstead", "Foxhall", "Greystone", "Hollybrook", "Ironbridge",
          "Juniper", "Kingsmere", "Larchmont", "Moorgate", "Nettlefield")
KINDS = ("Hotel", "Inn", "Suites", "House", "Lodge")
RANK = {"economy": 1, "standard": 2, "deluxe": 3, "suite": 4}
# nightly rate of each room type as a share of the traveller's cap: deluxe is within it, suite above
SHARE = {"economy": (0.50, 0.60), "standard": (0.65, 0.78), "deluxe": (0.82, 0.97),
         "suite": (1.15, 1.5)}
REASONS = ("The client moved the meeting.", "The project budget was cut.",
           "The conference agenda changed.", "The site visit was rescheduled.",
           "My team asked me to stay closer to the office.")


class Ids:
    """Train-range ids, unique across the whole file."""

    def __init__(self):
        self._employee, self._hotel = count(8001), count(8001)
        self._booking, self._approval = count(800001), count(80001)

    def employee(self): return f"E{next(self._employee)}"
    def hotel(self): return f"H{next(self._hotel)}"
    def booking(self): return f"B{next(self._booking)}"
    def approval(self): return f"AR{next(self._approval)}"


def cap(tier: str, city: str) -> float:
    default, cities = CAPS[tier]
    return float(cities.get(city, default))


def day(d: date) -> str:
    return d.isoformat()


def spoken(d: date) -> str:
    return f"{d:%B} {d.day}"


def money(x: float) -> str:
    return f"${x:,.2f}" if x != int(x) else f"${int(x):,}"


class Scene(taskgen.Scene):
    """The rows of one travel task. Hotels keep their `rates` by room type for the templates; the
    task's init leaves them out."""

    HELPER_KEYS = ("rates",)

    def employee(self, tier: str | None = None, manager: dict | None = None) -> dict:
        rng, eid = self.rng, self.ids.employee()
        first, last = rng.choice(FIRST), rng.choice(LAST)
        dept = rng.randrange(len(DEPARTMENTS))
        return self.add("employees", {
            "id": eid, "name": f"{first} {last}",
            "email": f"{first}.{last}.{eid[1:]}@northwind.example".lower(),
            "department": DEPARTMENTS[dept], "cost_center": f"CC-8{dept}{rng.randint(0, 9)}",
            "travel_tier": tier or rng.choice(("standard", "standard", "senior", "executive")),
            "manager_id": manager["id"] if manager else None, "home_city": rng.choice(CITIES)})

    def traveller(self, tier: str | None = None) -> tuple[dict, dict]:
        """A traveller and their manager (who approves their requests)."""
        manager = self.employee("senior")
        return self.employee(tier, manager), manager

    def hotel(self, city: str, tier: str, codes=("standard", "deluxe", "suite"),
              window=None) -> dict:
        """A hotel whose room rates sit where the traveller's cap puts them (see SHARE)."""
        rng, hid = self.rng, self.ids.hotel()
        limit = cap(tier, city)
        row = self.add("hotels", {
            "id": hid, "name": f"{rng.choice(BRANDS)} {rng.choice(KINDS)} {city}", "city": city,
            "stars": 3 + (len(codes) > 2), "cancel_window_hours": window or rng.choice((24, 48, 72))})
        row["rates"] = {}
        for code in codes:
            rate = float(round(limit * rng.uniform(*SHARE[code])))
            row["rates"][code] = rate
            self.add("room_types", {"hotel_id": hid, "code": code, "rank": RANK[code],
                                    "nightly_rate": rate, "rooms": rng.randint(3, 9)})
        return row

    def booking(self, employee: dict, hotel: dict, room: str, check_in: date, nights: int) -> dict:
        """A confirmed booking and its charge."""
        bid, rate, created = self.ids.booking(), hotel["rates"][room], "2026-02-12T11:00:00"
        row = self.add("bookings", {
            "id": bid, "employee_id": employee["id"], "booked_by": employee["id"],
            "hotel_id": hotel["id"], "room_type": room, "check_in": day(check_in),
            "check_out": day(check_in + timedelta(days=nights)), "nightly_rate": rate,
            "total": rate * nights, "cost_center": employee["cost_center"], "status": "confirmed",
            "cancel_fee": None, "created_at": created, "updated_at": created})
        self.add("payments", {"id": "PY" + bid[1:], "booking_id": bid, "kind": "charge",
                              "amount": rate * nights, "cost_center": employee["cost_center"],
                              "created_at": created})
        return row

    def approval(self, employee: dict, kind: str, status: str, booking: dict, room=None,
                 check_in=None, check_out=None) -> dict:
        return self.add("approval_requests", {
            "id": self.ids.approval(), "employee_id": employee["id"], "kind": kind,
            "booking_id": booking["id"], "hotel_id": booking["hotel_id"], "room_type": room,
            "check_in": check_in, "check_out": check_out, "reason": self.rng.choice(REASONS),
            "approver_id": employee["manager_id"], "status": status,
            "created_at": "2026-02-20T09:30:00",
            "decided_at": None if status == "pending" else "2026-02-23T14:00:00"})

    def stay(self, earliest: int = 7, latest: int = 60) -> tuple[date, int]:
        return TODAY + timedelta(days=self.rng.randint(earliest, latest)), self.rng.randint(2, 4)


def article(room: str) -> str:
    return ("an " if room[0] in "aeiou" else "a ") + room


def who(e: dict) -> str:
    return f"You are {e['name']} ({e['email']})."
