"""Deterministic seed for travel: 1,500 employees, 200 hotels, 6,000 bookings, ~2.5 MB.

endstate calls build(db, rng) once with rng = random.Random(0) and caches the result by the digest
of this file and schema.sql; change either and the seed is rebuilt.

The company is a tree: one CEO (no manager), 11 executives, 148 senior managers, and individual
contributors who report to a senior manager. Bookings before today are `completed`; about 6% are
`cancelled`. Every booking has a charge, and a cancelled one a refund of the total less its fee.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from endstate.api import insert_rows

FIRST = ("Ada Bruno Clara Dmitri Elif Felix Greta Hugo Ines Jonas Kira Lars Mina Nils Oskar Paula "
         "Rafael Sofia Tomas Una Viktor Wanda Yusuf Zora Anton Beatriz Cyrus Dalia Emil Freya").split()
LAST = ("Fischer Moreau Lindgren Tanaka Oduya Petrov Santos Berg Keller Novak Duarte Laine Walsh "
        "Adler Brennan Sato Vogel Marino Holm Quist").split()
DEPARTMENTS = ("Sales", "Engineering", "Finance", "Marketing", "Legal", "Operations", "People",
               "Consulting", "Research")
# city -> price factor; the first six have their own rate caps
CITIES = {"New York": 1.6, "San Francisco": 1.5, "London": 1.5, "Tokyo": 1.4, "Paris": 1.4,
          "Singapore": 1.3, "Chicago": 1.1, "Boston": 1.15, "Seattle": 1.1, "Austin": 1.0,
          "Denver": 0.95, "Atlanta": 0.95, "Toronto": 1.05, "Berlin": 1.0, "Dallas": 0.9,
          "Miami": 1.05, "Los Angeles": 1.2, "Washington": 1.2, "Amsterdam": 1.25, "Madrid": 0.95}
CAPS = {"standard": (180, {"New York": 260, "San Francisco": 250, "London": 240, "Tokyo": 230,
                           "Paris": 230, "Singapore": 220}),
        "senior": (250, {"New York": 350, "San Francisco": 330, "London": 320, "Tokyo": 300,
                         "Paris": 300, "Singapore": 290}),
        "executive": (400, {"New York": 550, "San Francisco": 520, "London": 500, "Tokyo": 480,
                            "Paris": 480, "Singapore": 460})}
BRANDS = ("Harbor Inn", "Meridian", "Grandview", "Parkside Suites", "Atlas Hotel", "Beacon Lodge",
          "Corner House", "Summit", "Linden Hotel", "Northgate")
AREAS = ("Downtown", "Airport", "Central", "Riverside", "Midtown", "Convention Center", "Old Town",
         "Waterfront")
ROOMS = {2: ("economy", "standard"), 3: ("economy", "standard", "deluxe"),
         4: ("standard", "deluxe", "suite"), 5: ("standard", "deluxe", "suite")}
RANK = {"economy": 1, "standard": 2, "deluxe": 3, "suite": 4}
RATE_FACTOR = {"economy": 0.8, "standard": 1.0, "deluxe": 1.35, "suite": 2.2}
NOW = datetime(2026, 3, 2, 9, 0, 0)
FIRST_STAY, LAST_STAY = date(2025, 9, 1), date(2026, 6, 30)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def _employees(rng: random.Random) -> list[tuple]:
    rows = []
    for i in range(1, 1501):
        if i == 1:
            tier, manager = "executive", None
        elif i <= 12:
            tier, manager = "executive", "E0001"
        elif i <= 160:
            tier, manager = "senior", f"E{rng.randint(2, 12):04d}"
        else:
            tier = "senior" if rng.random() < 0.1 else "standard"
            manager = f"E{rng.randint(13, 160):04d}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        dept = rng.randrange(len(DEPARTMENTS))
        rows.append((f"E{i:04d}", f"{first} {last}", f"{first}.{last}{i}@northwind.example".lower(),
                     DEPARTMENTS[dept], f"CC-{(dept + 1) * 100 + rng.randint(1, 20)}", tier, manager,
                     rng.choice(sorted(CITIES))))
    return rows


def _hotels(rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    hotels, rooms = [], []
    for i in range(1, 201):
        city = sorted(CITIES)[(i - 1) % len(CITIES)]
        stars = rng.choice((2, 3, 3, 4, 4, 5))
        hid = f"H{i:04d}"
        hotels.append((hid, f"{rng.choice(BRANDS)} {city} {rng.choice(AREAS)}", city, stars,
                       rng.choice((24, 48, 72))))
        base = CITIES[city] * (45 + 30 * stars) * rng.uniform(0.9, 1.1)
        for code in ROOMS[stars]:
            rooms.append((hid, code, RANK[code], round(base * RATE_FACTOR[code]),
                          rng.randint(2, 12)))
    return hotels, rooms


def _delegates(rng: random.Random, employees: list[tuple]) -> list[tuple[str, str]]:
    """(principal, delegate): most managers have an individual contributor who may book for them."""
    delegates = set()
    for principal in [e[0] for e in employees[:160]]:
        if rng.random() < 0.6:
            delegates.add((principal, f"E{rng.randint(161, 1500):04d}"))
    return sorted(delegates)


def _rate_caps() -> list[tuple]:
    """(tier, city, cap): each tier's cap anywhere ("*"), then its caps in the dear cities."""
    caps = [(tier, "*", cap) for tier, (cap, _) in CAPS.items()]
    caps += [(tier, city, cap) for tier, (_, by_city) in CAPS.items()
             for city, cap in by_city.items()]
    return caps


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    employees = _employees(rng)
    insert_rows(db, employees=employees)
    delegates = _delegates(rng, employees)
    insert_rows(db, delegates=delegates)
    insert_rows(db, rate_caps=_rate_caps())
    hotels, rooms = _hotels(rng)
    insert_rows(db, hotels=hotels, room_types=rooms)
    bookings = _bookings(rng, employees, delegates, hotels, rooms)
    insert_rows(db, bookings=bookings.bookings, payments=bookings.payments,
                approval_requests=bookings.approvals)
    insert_rows(db, escalations=_escalations(rng, bookings.bookings))


@dataclass
class Bookings:
    """The bookings and the rows they bring: payments, approval requests."""
    bookings: list[tuple] = field(default_factory=list)
    payments: list[tuple] = field(default_factory=list)
    approvals: list[tuple] = field(default_factory=list)


def _bookings(rng: random.Random, employees: list[tuple], delegates: list[tuple[str, str]],
              hotels: list[tuple], rooms: list[tuple]) -> Bookings:
    """6,000 bookings of random employees at random hotels, with their payments and now and then
    an approval request."""
    by_id = {e[0]: e for e in employees}
    delegate_of = {}  # the first of a principal's delegates books for them
    for principal, delegate in delegates:
        delegate_of.setdefault(principal, delegate)
    room_types = {}
    for hotel_id, code, _, rate, _ in rooms:
        room_types.setdefault(hotel_id, []).append((code, rate))
    rows = Bookings()
    for b in range(1, 6001):
        employee = by_id[f"E{rng.randint(1, 1500):04d}"]
        hotel_id = rng.choice(hotels)[0]
        _booking(rng, rows, f"B{b:06d}", employee, delegate_of.get(employee[0]), hotel_id,
                 room_types[hotel_id])
    return rows


def _booking(rng: random.Random, rows: Bookings, bid: str, employee: tuple, delegate: str | None,
             hotel_id: str, types: list[tuple[str, float]]) -> None:
    """A stay between FIRST_STAY and LAST_STAY booked 3 to 60 days ahead (by the employee or their
    delegate), its charge, and its refund if it was cancelled."""
    code, rate = rng.choice(types)
    rate = round(rate * rng.uniform(0.92, 1.05), 2)  # rates move; a booking keeps its own
    check_in = FIRST_STAY + timedelta(days=rng.randint(0, (LAST_STAY - FIRST_STAY).days))
    nights = rng.choice((1, 2, 2, 3, 3, 4, 5))
    check_out = check_in + timedelta(days=nights)
    booked_ahead = timedelta(days=rng.randint(3, 60))
    created = min(datetime.combine(check_in, datetime.min.time()) - booked_ahead,
                  NOW - timedelta(days=1)) + timedelta(minutes=rng.randint(480, 1080))
    booked_by = delegate if delegate is not None and rng.random() < 0.5 else employee[0]
    status = "completed" if check_out <= NOW.date() else "confirmed"
    total = round(nights * rate, 2)
    fee = None
    if rng.random() < 0.06:
        status = "cancelled"
        fee = rate if rng.random() < 0.3 else 0.0
    updated = created + timedelta(days=rng.randint(0, 2)) if status == "cancelled" else created
    rows.bookings.append((bid, employee[0], booked_by, hotel_id, code, check_in.isoformat(),
                          check_out.isoformat(), rate, total, employee[4], status, fee,
                          _ts(created), _ts(updated)))
    rows.payments.append((f"PY{len(rows.payments) + 1:06d}", bid, "charge", total, employee[4],
                          _ts(created)))
    if status == "cancelled" and total - fee > 0:
        rows.payments.append((f"PY{len(rows.payments) + 1:06d}", bid, "refund",
                              round(total - fee, 2), employee[4], _ts(updated)))
    if employee[6] and status != "cancelled" and rng.random() < 0.1:
        approval = _approval(rng, len(rows.approvals) + 1, employee, bid, hotel_id, code, check_in,
                             nights, types, created)
        if approval:
            rows.approvals.append(approval)


def _escalations(rng: random.Random, bookings: list[tuple]) -> list[tuple]:
    escalations = []
    for i in range(1, 61):
        b = rng.choice(bookings)
        summary = rng.choice(("Traveller asks for a refund of a completed stay.",
                              "Hotel charged a no-show fee the traveller disputes.",
                              "Traveller wants a room change during the stay."))
        escalations.append((f"ES{i:05d}", b[1], b[0], summary,
                            _ts(NOW - timedelta(days=rng.randint(1, 90)))))
    return escalations


def _approval(rng, n, employee, booking_id, hotel_id, code, check_in, nights, types, created):
    """A past approval request for a booking: a downgrade, a date change or an over-cap room."""
    kind = rng.choice(("downgrade", "date_change", "date_change", "over_cap"))
    lower = [c for c, _ in types if RANK[c] < RANK[code]]
    room, ci, co = None, None, None
    if kind == "downgrade":
        if not lower:
            return None
        room = rng.choice(lower)
    elif kind == "date_change":
        new_in = check_in + timedelta(days=rng.choice((-3, -2, -1, 1, 2, 3, 7)))
        ci, co = new_in.isoformat(), (new_in + timedelta(days=nights)).isoformat()
    else:
        room = code
    status = rng.choice(("approved", "approved", "denied", "pending"))
    decided = _ts(min(created + timedelta(hours=rng.randint(2, 72)), NOW)) if status != "pending" \
        else None
    return (f"AR{n:05d}", employee[0], kind, booking_id, hotel_id, room, ci, co,
            rng.choice(("Client meeting moved.", "Project budget is tight.", "Needs a quieter room.",
                        "Conference schedule changed.")),
            employee[6], status, _ts(created), decided)
