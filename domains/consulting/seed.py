"""Deterministic seed for consulting: 448 employees in four practices, 90 clients (35 on negotiated
rate cards), 300 engagements since mid-2025 with ~1,400 assignments that never over-book anyone,
daily time entries for the six weeks to Friday 2026-03-13 (~21,000: February's billed, March's
approved or waiting), monthly invoices with their lines, time off and the approvals behind every
discount and every invoice over $50,000.

endstate calls build(db, rng) once with a seeded rng and caches the result by the digest of this
file and schema.sql; change either and the seed is rebuilt. Money is REAL dollars, 2 decimals.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import date, timedelta

from endstate.api import insert_rows

FIRST = ("Aditi", "Bastian", "Celine", "Dorian", "Eleni", "Fabian", "Gemma", "Henrik", "Ilse",
         "Jasper", "Kira", "Lionel", "Maren", "Nils", "Odile", "Pieter", "Quinn", "Roisin",
         "Sanjay", "Tamsin", "Ulrich", "Vesna", "Wendell", "Xenia", "Yannis", "Zofia", "Arjun",
         "Bettina", "Cormac", "Delphine", "Emeka", "Freya", "Gaspard", "Hanna", "Idris", "Juno",
         "Kasimir", "Leonie", "Matteo", "Noor")
LAST = ("Achterberg", "Blackwood", "Cardenas", "Delacroix", "Eastwood", "Fairweather", "Grimaldi",
        "Haverford", "Ibsen", "Jaramillo", "Kingsley", "Lachapelle", "Montague", "Nightingale",
        "Oyelowo", "Pemberton", "Quaresma", "Radcliffe", "Sorensen", "Thorne", "Umberto",
        "Valentine", "Westbrook", "Yamamoto", "Zeller", "Ashdown", "Bergqvist", "Castellane",
        "Drummond", "Everly")
PRACTICES = ("strategy", "operations", "technology", "finance")
HEADCOUNT = {"partner": 6, "manager": 15, "senior": 28, "consultant": 35, "analyst": 28}
STANDARD = {"analyst": 185.0, "consultant": 240.0, "senior": 310.0, "manager": 385.0,
            "partner": 495.0}
CLIENT_WORDS = (("Northbeam", "Larkspur", "Cobalt", "Harrow", "Meridian", "Quillon", "Solace",
                 "Tamarind", "Vantage", "Wexford", "Brightmoor", "Calder", "Dunmore", "Everfield",
                 "Foxhall"),
                ("Logistics", "Health", "Energy", "Foods", "Capital", "Retail"))
INDUSTRY = {"Logistics": "transport", "Health": "healthcare", "Energy": "utilities",
            "Foods": "consumer goods", "Capital": "financial services", "Retail": "retail"}
TOPICS = ("supply chain redesign", "cost transformation", "ERP selection", "pricing strategy",
          "post-merger integration", "data platform roadmap", "operating model review",
          "procurement savings", "customer analytics", "finance function redesign")
TASKS = ("client workshop", "data analysis", "interviews", "deck drafting", "model build",
         "steering committee prep", "process mapping", "research", "review with manager")
LARGE_INVOICE = 50000.0  # policy.md: issued only with the partner's approval
TODAY = date(2026, 3, 16)
KEPT_FROM = date(2026, 2, 2)  # time entries are kept from this Monday on
LAST_DAY = date(2026, 3, 13)  # the last working day before today


@dataclass
class Rows:
    employees: list[tuple] = field(default_factory=list)
    time_off: list[tuple] = field(default_factory=list)
    cards: list[tuple] = field(default_factory=list)
    clients: list[tuple] = field(default_factory=list)
    engagements: list[tuple] = field(default_factory=list)
    assignments: list[tuple] = field(default_factory=list)
    entries: list[tuple] = field(default_factory=list)
    invoices: list[tuple] = field(default_factory=list)
    lines: list[tuple] = field(default_factory=list)
    approvals: list[tuple] = field(default_factory=list)
    booked: dict[str, list[tuple[date, date, float]]] = field(default_factory=dict)
    staff: dict[tuple[str, str], list[tuple[str, float]]] = field(default_factory=dict)


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    rows = Rows()
    _employees(rng, rows)
    rates = _clients(rng, rows)
    for n in range(1, 301):
        _engagement(rng, rows, n, rates)
    insert_rows(db, employees=rows.employees, time_off=rows.time_off, rate_cards=rows.cards,
                clients=rows.clients, engagements=rows.engagements, assignments=rows.assignments,
                time_entries=rows.entries, invoices=rows.invoices, invoice_lines=rows.lines,
                approvals=rows.approvals)


def _employees(rng: random.Random, rows: Rows) -> None:
    """Unique names (sampled without replacement), 112 people per practice, some part-time; about
    one in six has time off coming."""
    names = rng.sample([(f, s) for f in FIRST for s in LAST], 4 * sum(HEADCOUNT.values()))
    for practice in PRACTICES:
        for level, count in HEADCOUNT.items():
            for _ in range(count):
                first, last = names.pop()
                eid = f"E{len(rows.employees) + 1:04d}"
                capacity = rng.choices((40.0, 32.0, 24.0), (87, 10, 3))[0]
                rows.employees.append((eid, f"{first} {last}",
                                       f"{first}.{last}@alderfinch.example".lower(), level,
                                       practice, capacity))
                rows.staff.setdefault((practice, level), []).append((eid, capacity))
                if rng.random() < 0.16:
                    start = TODAY + timedelta(days=rng.randint(-10, 80))
                    rows.time_off.append((f"TO{len(rows.time_off) + 1:05d}", eid,
                                          start.isoformat(),
                                          (start + timedelta(days=rng.choice((0, 4, 7, 11)))
                                           ).isoformat(),
                                          rng.choices(("vacation", "training", "leave"),
                                                      (70, 20, 10))[0]))


def _clients(rng: random.Random, rows: Rows) -> dict[str, dict[str, float]]:
    """90 clients; 35 bill on a negotiated card 5-15% under the standard one. Returns client id ->
    level -> rate."""
    for level, rate in STANDARD.items():
        rows.cards.append(("standard", level, rate))
    names = rng.sample([f"{a} {b}" for a in CLIENT_WORDS[0] for b in CLIENT_WORDS[1]], 90)
    rates = {}
    for n, name in enumerate(names, 1):
        cid = f"K{n:04d}"
        card, own = "standard", dict(STANDARD)
        if n <= 35:
            card, off = f"RC-{cid}", rng.choice((0.05, 0.1, 0.15))
            own = {lvl: float(round(r * (1 - off) / 5) * 5) for lvl, r in STANDARD.items()}
            rows.cards += [(card, lvl, r) for lvl, r in own.items()]
        rows.clients.append((cid, name, INDUSTRY[name.split()[1]],
                             f"ap@{name.split()[0].lower()}{name.split()[1].lower()}.example",
                             rng.choice((30, 30, 45, 60)), card))
        rates[cid] = own
    return rates


def _fits(rows: Rows, eid: str, capacity: float, start: date, end: date, hours: float) -> bool:
    """The new assignment fits the person's capacity as policy.md counts it (the hours of every
    assignment overlapping its dates), and leaves each assignment it overlaps within it too."""
    mine = rows.booked.get(eid, [])
    overlapping = [(s, e, h) for s, e, h in mine if s <= end and e >= start]
    return all(sum(h for s2, e2, h in mine if s2 <= e and e2 >= s) + hours <= capacity
               for s, e, _ in [(start, end, 0.0), *overlapping])


def _engagement(rng: random.Random, rows: Rows, n: int, rates: dict) -> None:
    """An engagement of 8-30 weeks with a manager, a partner and 3-6 staff who fit their capacity;
    its time since KEPT_FROM, its monthly invoices, and its budget above what it bills."""
    eid = f"EN{n:04d}"
    client = f"K{rng.randint(1, 90):04d}"
    practice = rng.choice(PRACTICES)
    start = date(2025, 6, 2) + timedelta(weeks=rng.randint(0, 42))
    end = start + timedelta(weeks=rng.randint(8, 30), days=4)
    manager = rng.choice(rows.staff[(practice, "manager")])[0]
    partner = rng.choice(rows.staff[(practice, "partner")])[0]
    team = []
    for _ in range(rng.randint(3, 6)):
        level = rng.choice(("analyst", "consultant", "consultant", "senior", "senior"))
        hours = float(rng.choice((8, 16, 20, 24, 32, 40)))
        for person, capacity in rng.sample(rows.staff[(practice, level)], 6):
            if _fits(rows, person, capacity, start, end, hours) and person not in [t[0] for t in team]:
                rows.booked.setdefault(person, []).append((start, end, hours))
                team.append((person, level, hours))
                break
    fees, entries, rated = 0.0, [], []
    for person, level, hours in team:
        rate = rates[client][level]
        if rng.random() < 0.06:  # a discount, approved by the partner
            rate = float(round(rate * 0.9 / 5) * 5)
            rows.approvals.append((f"AP{len(rows.approvals) + 1:05d}", "rate_exception", eid,
                                   person, rate, manager, partner, "strategic client discount",
                                   "approved", f"{start.isoformat()}T10:00:00",
                                   f"{start.isoformat()}T16:00:00"))
        aid = f"AS{len(rows.assignments) + 1:05d}"
        rows.assignments.append((aid, eid, person, hours, start.isoformat(), end.isoformat(), rate,
                                 f"{(start - timedelta(days=7)).isoformat()}T09:00:00"))
        rated.append((person, hours, rate))
        fees += hours * ((end - start).days + 1) / 7 * rate
        entries += _time(rng, rows, eid, person, hours, start, end, manager)
    billed = _invoices(rows, eid, rated, entries, start, end, manager, partner)
    budget = round(max(fees, billed) * rng.uniform(1.08, 1.4), -3)
    rows.engagements.append((eid, client, f"{rng.choice(TOPICS).capitalize()}",
                             "closed" if end < TODAY else "active", start.isoformat(),
                             end.isoformat(), budget, manager, partner))


def _time(rng: random.Random, rows: Rows, eid: str, person: str, hours: float, start: date,
          end: date, manager: str) -> list[list]:
    """Daily entries of the assignment from KEPT_FROM to LAST_DAY, approved by the manager:
    February's billed later by the engagement's invoice, March's approved (the first week) or
    mostly waiting (the second). Returns them."""
    first, day = len(rows.entries), max(start, KEPT_FROM)
    while day <= min(end, LAST_DAY):
        if day.weekday() < 5:
            status = ("billed" if day.month == 2 else "approved" if day.day <= 6 else
                      rng.choices(("submitted", "approved", "rejected"), (75, 23, 2))[0])
            rows.entries.append([f"TE{len(rows.entries) + 1:06d}", person, eid, day.isoformat(),
                                 hours / 5, rng.choice(TASKS), status,
                                 None if status == "submitted" else manager, None,
                                 "hours do not match the calendar" if status == "rejected" else None,
                                 f"{day.isoformat()}T18:00:00"])
        day += timedelta(days=1)
    return rows.entries[first:]


def _invoices(rows: Rows, eid: str, team: list[tuple[str, float, float]], entries: list[list],
              start: date, end: date, manager: str, partner: str) -> float:
    """One invoice per month the engagement ran, to February: lines per person (hours a week,
    rate) before the time kept here, one line per entry for February. Returns the fees billed."""
    total, month = 0.0, start.replace(day=1)
    while month <= min(end, date(2026, 2, 28)):
        iid = f"IN{len(rows.invoices) + 1:05d}"
        lines = _month_lines(iid, team, month, entries, start, end)
        amount = round(sum(x[-1] for x in lines), 2)
        if amount:
            sent = (month.replace(day=28) + timedelta(days=6)).replace(day=2)
            rows.lines += lines
            rows.invoices.append((iid, eid, amount, "paid" if sent < date(2026, 2, 1) else
                                  "issued", f"{sent.isoformat()}T09:00:00",
                                  f"{sent.isoformat()}T11:00:00"))
            if amount > LARGE_INVOICE:
                rows.approvals.append((f"AP{len(rows.approvals) + 1:05d}", "invoice", iid, None,
                                       amount, manager, partner, "monthly invoice", "approved",
                                       f"{sent.isoformat()}T09:30:00",
                                       f"{sent.isoformat()}T10:30:00"))
            total += amount
        month = (month.replace(day=28) + timedelta(days=4)).replace(day=1)
    return total


def _month_lines(iid: str, team: list[tuple[str, float, float]], month: date, entries: list,
                 start: date, end: date) -> list[tuple]:
    rate_of = {person: rate for person, _, rate in team}
    if month.month == 2 and month.year == 2026:
        lines = []
        for e in entries:
            if e[3].startswith("2026-02"):
                e[8] = iid
                lines.append((iid, len(lines) + 1, e[1], e[0], e[4], rate_of[e[1]],
                              round(e[4] * rate_of[e[1]], 2)))
        return lines
    first = max(month, start)
    last = min((month.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1), end)
    weeks = ((last - first).days + 1) / 7
    return [(iid, k, person, None, round(hours * weeks, 2), rate_of[person],
             round(round(hours * weeks, 2) * rate_of[person], 2))
            for k, (person, hours, _) in enumerate(team, 1) if weeks > 0]
