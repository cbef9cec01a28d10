"""Deterministic seed for insurance: 2,500 policyholders, ~3,000 six-month auto policies (about 1
in 12 lapsed, a few reinstated), ~5,300 vehicles with ~19,000 coverages, ~5,400 drivers (some
excluded or removed), ~2,500 claims with the appraiser's estimates, the payments the policy rules
give, adjuster reviews for the large ones, and the premium payments of the last few months.

endstate calls build(db, rng) once with a seeded rng and caches the result by the digest of this
file and schema.sql; change either and the seed is rebuilt. Money is REAL dollars, 2 decimals.
"""

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from endstate.api import insert_rows

FIRST = ("Abigail", "Bernard", "Carmen", "Dario", "Edith", "Fergus", "Gloria", "Hector", "Imani",
         "Jonas", "Keiko", "Lorenzo", "Marisol", "Nolan", "Odette", "Pablo", "Rhea", "Soren",
         "Tatiana", "Umar", "Vera", "Wesley", "Yara", "Zane", "Astrid", "Boris", "Clio", "Dante",
         "Elena", "Felix", "Greer", "Hugo")
LAST = ("Albright", "Brennan", "Caruso", "Dunmore", "Ellison", "Fairbanks", "Guerrero", "Hale",
        "Ishikawa", "Jensen", "Kowalski", "Lowry", "Mendoza", "Novak", "Okafor", "Pruitt",
        "Quinlan", "Rossi", "Stavros", "Tremblay", "Underhill", "Vance", "Whitfield", "Yates")
ZIP3 = ("021", "100", "191", "303", "331", "441", "606", "750", "802", "850", "941", "981")
MAKES = {"Toyota": ("Camry", "Corolla", "RAV4", "Tacoma"), "Honda": ("Civic", "Accord", "CR-V"),
         "Ford": ("F-150", "Escape", "Explorer"), "Chevrolet": ("Silverado", "Equinox", "Malibu"),
         "Subaru": ("Outback", "Forester", "Crosstrek"), "Hyundai": ("Elantra", "Tucson"),
         "Nissan": ("Altima", "Rogue"), "Tesla": ("Model 3", "Model Y"), "Kia": ("Sorento", "Soul"),
         "Mazda": ("CX-5", "Mazda3"), "Volkswagen": ("Jetta", "Tiguan"), "Jeep": ("Wrangler",
                                                                                 "Cherokee")}
VIN_CHARS = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"  # no I, O or Q, as on real VINs
DEDUCTIBLES = (250.0, 500.0, 500.0, 1000.0, 1000.0, 2000.0)
LIABILITY_LIMITS = (50000.0, 100000.0, 300000.0)
RENTAL_LIMITS = (600.0, 900.0, 1200.0)
ROADSIDE_LIMITS = (100.0, 150.0, 250.0)
LOSS_TYPES = {"collision": 50, "glass": 14, "weather": 12, "animal": 8, "vandalism": 8, "theft": 8}
STORIES = {"collision": ("rear-ended at a light", "backed into a pole", "side-swiped on the highway",
                         "slid into a guardrail on ice"),
           "glass": ("cracked windshield from a stone", "broken side window"),
           "weather": ("hail dents on roof and hood", "flood water in the cabin", "tree branch fell"),
           "animal": ("hit a deer at night", "struck a coyote"),
           "vandalism": ("keyed along both doors", "slashed tires and mirror"),
           "theft": ("stolen from the driveway", "catalytic converter stolen")}
REVIEW_THRESHOLD = 5000.0  # policy.md: payouts above this need an adjuster
TODAY = date(2026, 3, 10)
NOW = datetime(2026, 3, 10, 10, 0, 0)


def _ts(t: datetime) -> str:
    return t.isoformat(timespec="seconds")  # YYYY-MM-DDTHH:MM:SS, faster than strftime


def _month_end(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


@dataclass
class Rows:
    """The rows drawn policyholder by policyholder, inserted once all are drawn."""
    customers: list[tuple] = field(default_factory=list)
    policies: list[tuple] = field(default_factory=list)
    vehicles: list[tuple] = field(default_factory=list)
    drivers: list[tuple] = field(default_factory=list)
    coverages: list[tuple] = field(default_factory=list)
    claims: list[tuple] = field(default_factory=list)
    estimates: list[tuple] = field(default_factory=list)
    payments: list[tuple] = field(default_factory=list)
    premiums: list[tuple] = field(default_factory=list)
    reviews: list[tuple] = field(default_factory=list)
    escalations: list[tuple] = field(default_factory=list)


@dataclass
class Policy:
    """What the claims of a policy need to know of it."""
    id: str
    effective: date
    lapsed_on: date | None
    reinstated_on: date | None
    drivers: list[tuple[str, str]]  # (id, status)
    vehicles: list[tuple[str, dict[str, tuple[float, float]]]]  # (id, kind -> (limit, deductible))


def build(db: sqlite3.Connection, rng: random.Random) -> None:
    rows = Rows()
    for c in range(1, 2501):
        cid, name, since = _customer(rng, rows, c)
        for _ in range(rng.choice((1, 1, 1, 1, 2))):
            policy = _policy(rng, rows, cid, name, since)
            _claims(rng, rows, policy)
    insert_rows(db, customers=rows.customers, policies=rows.policies, vehicles=rows.vehicles,
                drivers=rows.drivers, coverages=rows.coverages, claims=rows.claims,
                estimates=rows.estimates, payments=rows.payments,
                premium_payments=rows.premiums, adjuster_reviews=rows.reviews,
                escalations=rows.escalations)


def _customer(rng: random.Random, rows: Rows, c: int) -> tuple[str, str, datetime]:
    cid = f"C{c:04d}"
    first, last = rng.choice(FIRST), rng.choice(LAST)
    since = NOW - timedelta(days=rng.randint(200, 4000))
    rows.customers.append((cid, f"{first} {last}", f"{first}.{last}{c}@example.com".lower(),
                           f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                           f"{rng.choice(ZIP3)}{rng.randint(0, 99):02d}", _ts(since)))
    return cid, f"{first} {last}", since


def _policy(rng: random.Random, rows: Rows, cid: str, name: str, since: datetime) -> Policy:
    """A six-month policy: paid through this month, or lapsed (16 days after the last paid day),
    now and then reinstated."""
    pid = f"P{len(rows.policies) + 1:05d}"
    effective = TODAY - timedelta(days=rng.randint(0, 181))
    premium = round(rng.uniform(62, 290), 2)
    state = rng.choices(("active", "lapsed", "reinstated"), (88, 8, 4))[0]
    paid = _month_end(TODAY)
    lapsed_on = reinstated_on = None
    if state != "active":
        paid = _month_end(TODAY.replace(day=1) - timedelta(days=rng.choice((1, 32, 62))))
        lapsed_on = paid + timedelta(days=16)
        effective = min(effective, paid - timedelta(days=40))
        if state == "reinstated":
            reinstated_on = lapsed_on + timedelta(days=rng.randint(3, 20))
            paid = _month_end(TODAY)
    rows.policies.append((pid, cid, "lapsed" if state == "lapsed" else "active",
                          effective.isoformat(), (effective + timedelta(days=181)).isoformat(),
                          premium, paid.isoformat(), lapsed_on and lapsed_on.isoformat(),
                          reinstated_on and reinstated_on.isoformat(),
                          _ts(max(since, NOW - timedelta(days=rng.randint(1, 90))))))
    month = max(effective, TODAY - timedelta(days=100)).replace(day=1)  # the last few months
    while month <= paid:
        rows.premiums.append((f"PP{len(rows.premiums) + 1:06d}", pid, premium,
                              _month_end(month).isoformat(), f"{month.isoformat()}T06:00:00"))
        month = _month_end(month) + timedelta(days=1)
    drivers = _drivers(rng, rows, pid, name)
    vehicles = [_vehicle(rng, rows, pid) for _ in range(rng.choice((1, 1, 2, 2, 3)))]
    return Policy(pid, effective, lapsed_on, reinstated_on, drivers, vehicles)


def _drivers(rng: random.Random, rows: Rows, pid: str, name: str) -> list[tuple[str, str]]:
    """The policyholder, and often a household member or two; about 1 in 25 policies excludes a
    driver, a few have removed one."""
    last = name.split()[-1]
    people = [(name, rng.randint(1950, 2001))]
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        people.append((f"{rng.choice(FIRST)} {last}", rng.randint(1950, 2008)))
    out = []
    for k, (person, year) in enumerate(people):
        status = "listed" if k == 0 else rng.choices(("listed", "excluded", "removed"),
                                                     (85, 9, 6))[0]
        did = f"DR{len(rows.drivers) + 1:05d}"
        rows.drivers.append((did, pid, person, f"D{rng.randint(1000000, 9999999)}",
                             date(year, rng.randint(1, 12), rng.randint(1, 28)).isoformat(),
                             status, _ts(NOW - timedelta(days=rng.randint(30, 900)))))
        out.append((did, status))
    return out


def _vehicle(rng: random.Random, rows: Rows, pid: str) -> tuple[str, dict]:
    """A vehicle and its coverages: liability always, collision and comprehensive on most (limit:
    the car's value), rental and roadside on some."""
    vid = f"V{len(rows.vehicles) + 1:05d}"
    make = rng.choice(sorted(MAKES))
    year = rng.randint(2008, 2026)
    rows.vehicles.append((vid, pid, "".join(rng.choice(VIN_CHARS) for _ in range(17)), year, make,
                          rng.choice(MAKES[make])))
    value = round(rng.uniform(4000, 9000) + (year - 2008) * rng.uniform(1200, 2600), -2)
    kinds = {"liability": (rng.choice(LIABILITY_LIMITS), 0.0)}
    if rng.random() < 0.8:
        kinds["collision"] = (value, rng.choice(DEDUCTIBLES))
    if rng.random() < 0.85:
        kinds["comprehensive"] = (value, rng.choice(DEDUCTIBLES))
    if rng.random() < 0.4:
        kinds["rental"] = (rng.choice(RENTAL_LIMITS), 0.0)
    if rng.random() < 0.5:
        kinds["roadside"] = (rng.choice(ROADSIDE_LIMITS), 0.0)
    updated = _ts(NOW - timedelta(days=rng.randint(30, 400)))
    for kind, (limit, deductible) in kinds.items():
        rows.coverages.append((vid, kind, limit, deductible, updated))
    return vid, kinds


def _claims(rng: random.Random, rows: Rows, policy: Policy) -> None:
    """Past losses of the policy's vehicles: mostly settled as policy.md says, recent ones open."""
    for vid, kinds in policy.vehicles:
        for _ in range(rng.choices((0, 1, 2), (62, 30, 8))[0]):
            loss_type = rng.choices(list(LOSS_TYPES), list(LOSS_TYPES.values()))[0]
            loss = policy.effective + timedelta(days=rng.randint(0, (TODAY - policy.effective).days))
            listed = [d for d, status in policy.drivers if status != "removed"]
            driver = rng.choice(listed) if loss_type in ("collision", "animal") else None
            cid = f"CL{len(rows.claims) + 1:05d}"
            estimates = _estimates(rng, rows, cid, loss_type, kinds) if loss < TODAY - \
                timedelta(days=4) else {}
            status, reason = _decide(rng, rows, policy, cid, loss, loss_type, driver, kinds,
                                     estimates)
            reported = datetime.combine(loss, datetime.min.time()) + timedelta(hours=rng.randint(
                8, 60))
            rows.claims.append((cid, policy.id, vid, driver, loss.isoformat(), loss_type,
                                rng.choice(STORIES[loss_type]), status, reason,
                                _ts(min(reported, NOW)), _ts(min(reported + timedelta(days=6),
                                                                 NOW))))


def _estimates(rng: random.Random, rows: Rows, cid: str, loss_type: str,
               kinds: dict) -> dict[str, float]:
    """The appraiser's figures: the damage under its coverage, and a rental car and a tow when the
    vehicle has those coverages and the loss kept it off the road."""
    main = "collision" if loss_type == "collision" else "comprehensive"
    low, high = {"glass": (180, 1400), "theft": (900, 18000)}.get(loss_type, (400, 9500))
    out = {main: round(rng.uniform(low, high), 2)}
    if loss_type in ("collision", "animal", "theft") and "rental" in kinds and rng.random() < 0.7:
        out["rental"] = float(rng.randint(3, 24) * 35)
    if loss_type in ("collision", "animal") and "roadside" in kinds and rng.random() < 0.6:
        out["roadside"] = float(rng.choice((85, 120, 165, 240)))
    for coverage, amount in out.items():
        rows.estimates.append((cid, coverage, amount, f"appraised {coverage} loss"))
    return out


def _decide(rng: random.Random, rows: Rows, policy: Policy, cid: str, loss: date, loss_type: str,
            driver: str | None, kinds: dict, estimates: dict) -> tuple[str, str | None]:
    """(status, denial reason) of a claim, with the payments and review the policy gives it."""
    lapsed = policy.lapsed_on is not None and policy.lapsed_on <= loss and (
        policy.reinstated_on is None or loss < policy.reinstated_on)
    main = "collision" if loss_type == "collision" else "comprehensive"
    excluded = driver is not None and (driver, "excluded") in policy.drivers
    if lapsed:
        return ("denied", "not_in_force") if estimates else ("open", None)
    if excluded:
        return "denied", "excluded_driver"
    if main not in kinds:
        return "denied", "not_covered"
    if not estimates or rng.random() < 0.15:
        return ("withdrawn", None) if estimates and rng.random() < 0.3 else ("open", None)
    due = {c: min(kinds[c][0], round(a - kinds[c][1], 2)) for c, a in estimates.items()
           if c in kinds and a > kinds[c][1]}
    total = round(sum(due.values()), 2)
    if total > REVIEW_THRESHOLD:
        decided = rng.random() < 0.75
        rows.reviews.append((f"AR{len(rows.reviews) + 1:05d}", cid, total, "payout over $5,000",
                             "approved" if decided else "pending", _ts(NOW - timedelta(days=3)),
                             _ts(NOW - timedelta(days=1)) if decided else None))
        if not decided:
            return "open", None
    paid = min(datetime.combine(loss, datetime.min.time()) + timedelta(days=rng.randint(5, 20)),
               NOW - timedelta(hours=20))
    for coverage, amount in due.items():
        rows.payments.append((f"PY{len(rows.payments) + 1:05d}", cid, coverage, amount, _ts(paid)))
    return "closed", None
