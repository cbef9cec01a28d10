"""The entities the insurance templates (insurance.py) sample into a task's Scene: a policyholder in
the reserved train id range, their policy (in force, lapsed or reinstated), vehicles with
coverages, drivers, claims with the appraiser's estimates and adjuster reviews, and how the user
identifies themselves. The payout arithmetic mirrors policy.md (and the domain's checks.py).
"""

from __future__ import annotations

from datetime import date, timedelta
from itertools import count

import taskgen
from taskgen import allow, approx, call, only, python_check, row

_seed = taskgen.domain_seed("insurance")
MAKES, STORIES = _seed.MAKES, _seed.STORIES
TODAY = _seed.TODAY  # the insurance domain's fixed clock
REVIEW_THRESHOLD = _seed.REVIEW_THRESHOLD

# Names the seed never uses (nor the bench), so a name and zip identify one customer.
FIRST = ("Adaeze", "Bruno", "Camila", "Dmitri", "Esme", "Fatima", "Gustavo", "Helga", "Ikaika",
         "Joaquin", "Kalani", "Leona", "Mirela", "Nikolai", "Orla", "Priyanka", "Rafael",
         "Saoirse", "Tobias", "Ulla", "Valentina", "Wiremu", "Ximena", "Yusra", "Zoltan")
LAST = ("Abernathy", "Baptiste", "Castellano", "Dragomir", "Eriksen", "Fontaine", "Gallagher",
        "Halvorsen", "Iwasaki", "Jankowski", "Kaur", "Lindgren", "Moreau", "Nakamura", "Oyelaran",
        "Petrov", "Quintero", "Rasmussen")
KIN = ("Milo", "Tess", "Arlo", "June", "Remy", "Ivy", "Otto", "Lena", "Cass", "Nico")
ZIPS = ("02139", "10025", "19103", "30307", "33133", "44106", "60614", "75204", "80206", "98103")
MAIL_HOSTS = ("mailbox.example", "inbox.example", "post.example")
DEDUCTIBLES = (250.0, 500.0, 1000.0, 2000.0)
MAIN_COVERAGE = {"collision": "collision", "theft": "comprehensive", "weather": "comprehensive",
                 "glass": "comprehensive", "vandalism": "comprehensive", "animal": "comprehensive"}


class Ids:
    """Train-range ids, unique across the whole file, and the variant each template draws next:
    templates take their variants in turn, so every variant gets its share of the file."""

    def __init__(self):
        self._n = {kind: count(start) for kind, start in (
            ("C", 8001), ("P", 80001), ("V", 80001), ("DR", 80001), ("CL", 80001), ("AR", 80001))}
        self._turn: dict[str, int] = {}

    def next(self, prefix: str) -> str:
        return f"{prefix}{next(self._n[prefix])}"

    def variant(self, template: str, options: tuple[str, ...]) -> str:
        k = self._turn.get(template, 0)
        self._turn[template] = k + 1
        return options[k % len(options)]


def month_end(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


class Scene(taskgen.Scene):
    """The rows of one insurance task. A vehicle keeps its `label` ("2019 Honda Civic") for the
    templates' use; the task's init leaves it out."""

    HELPER_KEYS = ("label",)

    def customer(self) -> dict:
        rng = self.rng
        first, last, cid = rng.choice(FIRST), rng.choice(LAST), self.ids.next("C")
        return self.add("customers", {
            "id": cid, "name": f"{first} {last}",
            "email": f"{first}.{last}.{cid[1:]}@{rng.choice(MAIL_HOSTS)}".lower(),
            "phone": f"555-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            "zip": rng.choice(ZIPS), "created_at": "2021-05-03T09:00:00"})

    def policy(self, c: dict, months_back: int = 0, reinstated_on: date | None = None) -> dict:
        """A six-month policy paid through the end of this month; with `months_back`, paid only
        through the end of the month that many months ago, so lapsed 16 days after that (and
        lapsed still, unless `reinstated_on`)."""
        rng = self.rng
        effective = TODAY - timedelta(days=rng.randint(60, 150))
        paid, lapsed = month_end(TODAY), None
        if months_back:
            paid = month_end(TODAY)
            for _ in range(months_back):
                paid = paid.replace(day=1) - timedelta(days=1)
            lapsed = paid + timedelta(days=16)
            effective = min(effective, paid - timedelta(days=45))
            if reinstated_on is not None:
                paid = month_end(TODAY)
        return self.add("policies", {
            "id": self.ids.next("P"), "customer_id": c["id"],
            "status": "lapsed" if lapsed and reinstated_on is None else "active",
            "effective_date": effective.isoformat(),
            "expiration_date": (effective + timedelta(days=181)).isoformat(),
            "monthly_premium": round(rng.uniform(70, 240), 2), "paid_through": paid.isoformat(),
            "lapsed_on": lapsed and lapsed.isoformat(),
            "reinstated_on": reinstated_on and reinstated_on.isoformat(),
            "updated_at": "2026-01-05T08:00:00"})

    def vehicle(self, p: dict, coverages: dict[str, tuple[float, float]]) -> dict:
        """A vehicle on policy `p` with coverages kind -> (limit, deductible); liability always."""
        rng = self.rng
        make = rng.choice(sorted(MAKES))
        vehicle = self.add("vehicles", {
            "id": self.ids.next("V"), "policy_id": p["id"],
            "vin": "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ0123456789") for _ in range(17)),
            "year": rng.randint(2012, 2025), "make": make, "model": rng.choice(MAKES[make])})
        for kind, (limit, deductible) in {"liability": (100000.0, 0.0), **coverages}.items():
            self.add("coverages", {"vehicle_id": vehicle["id"], "kind": kind,
                                   "limit_amount": limit, "deductible": deductible,
                                   "updated_at": "2025-10-01T08:00:00"})
        vehicle["label"] = f"{vehicle['year']} {make} {vehicle['model']}"
        return vehicle

    def driver(self, p: dict, name: str, status: str = "listed") -> dict:
        return self.add("drivers", {
            "id": self.ids.next("DR"), "policy_id": p["id"], "name": name,
            "license_number": f"D{self.rng.randint(1000000, 9999999)}",
            "birth_date": date(self.rng.randint(1960, 2006), self.rng.randint(1, 12),
                               self.rng.randint(1, 28)).isoformat(),
            "status": status, "updated_at": "2025-09-01T08:00:00"})

    def claim(self, p: dict, v: dict, loss: date, loss_type: str, driver: dict | None,
              estimates: dict[str, float]) -> dict:
        cid = self.ids.next("CL")
        reported = f"{min(loss + timedelta(days=1), TODAY).isoformat()}T09:30:00"
        claim = self.add("claims", {
            "id": cid, "policy_id": p["id"], "vehicle_id": v["id"],
            "driver_id": driver and driver["id"], "loss_date": loss.isoformat(),
            "loss_type": loss_type, "description": self.rng.choice(STORIES[loss_type]),
            "status": "open", "denial_reason": None, "reported_at": reported,
            "updated_at": reported})
        for coverage, amount in estimates.items():
            self.add("estimates", {"claim_id": cid, "coverage": coverage, "amount": amount,
                                   "note": f"appraised {coverage} loss"})
        return claim

    def review(self, claim: dict, amount: float, status: str) -> dict:
        return self.add("adjuster_reviews", {
            "id": self.ids.next("AR"), "claim_id": claim["id"], "amount": amount,
            "reason": "payout over $5,000", "status": status,
            "created_at": "2026-03-06T11:00:00",
            "decided_at": "2026-03-09T15:00:00" if status != "pending" else None})

    def household(self, c: dict, p: dict, others: int = 0) -> list[dict]:
        """The policyholder as a listed driver, and `others` listed family members."""
        last = c["name"].split()[-1]
        names = [c["name"]] + [f"{k} {last}" for k in self.rng.sample(KIN, others)]
        return [self.driver(p, name) for name in names]


def due(coverages: dict[str, tuple[float, float]], estimates: dict[str, float]) -> dict[str, float]:
    """Per coverage, what policy.md pays: estimate less deductible, within the limit."""
    out = {}
    for coverage, amount in estimates.items():
        limit, deductible = coverages[coverage]
        if amount > deductible:
            out[coverage] = round(min(limit, amount - deductible), 2)
    return out


def identify(s: Scene, c: dict) -> tuple[str, dict]:
    """What the user says to be identified, and the gold lookup for it (email, or name and zip)."""
    if s.rng.random() < 0.7:
        return f"My email is {c['email']}.", call("find_customer", email=c["email"])
    return (f"I'm {c['name']}, zip code {c['zip']}.",
            call("find_customer", name=c["name"], zip=c["zip"]))


def who(c: dict) -> str:
    return f"You are {c['name']} (email {c['email']}, zip {c['zip']})."


# -- task pieces ------------------------------------------------------------------------------

def physical(s: Scene, value: float | None = None, deductible: float | None = None) -> dict:
    """Collision and comprehensive coverages on a car worth `value`."""
    value = value or float(s.rng.randint(90, 420) * 100)
    d = deductible or s.rng.choice(DEDUCTIBLES[:3])
    return {"collision": (value, d), "comprehensive": (value, s.rng.choice(DEDUCTIBLES[:3]))}


def lookup(find: dict, c: dict, p: dict, claim: dict | None = None) -> list[dict]:
    return [find, call("get_customer", customer_id=c["id"])] + (
        [call("get_claim", claim_id=claim["id"])] if claim else []) + [
        call("get_policy", policy_id=p["id"])]


def paid(claim: dict, amounts: dict[str, float]) -> tuple[list, list, list]:
    """(gold calls, checks, allowed changes) of paying `amounts` per coverage on the claim."""
    gold = [call("pay_claim", claim_id=claim["id"], coverage=k, amount=a) for k, a in amounts.items()]
    checks = [row(f"paid-{k}", "payments", {"claim_id": claim["id"], "coverage": k},
                  {"amount": approx(a)}) for k, a in amounts.items()]
    checks.append(python_check("per-policy", "claim_settled_per_policy", claim_id=claim["id"]))
    return gold, checks, [allow("payments", {"claim_id": claim["id"]}, len(amounts)),
                          allow("claims", {"id": claim["id"]})]


def denied(claim: dict, reason: str) -> tuple[list, list]:
    """(gold calls, checks) of denying the claim for `reason`, paying nothing."""
    return ([call("deny_claim", claim_id=claim["id"], reason=reason)],
            [row("denied", "claims", {"id": claim["id"]},
                 {"status": "denied", "denial_reason": reason}),
             python_check("per-policy", "claim_settled_per_policy", claim_id=claim["id"]),
             only(allow("claims", {"id": claim["id"]}))])
