"""The entities the bank templates (bank.py) sample: a customer in the reserved train id range,
their accounts, cards and purchases, the charge a dispute is about, and how the user identifies
themselves.
"""

import random
from dataclasses import dataclass
from datetime import date, timedelta

from taskgen import call

TODAY = date(2026, 1, 15)  # the bank domain's fixed clock

FIRST = ("Aurelia", "Benedikt", "Cosima", "Desmond", "Elif", "Florian", "Gwen", "Henrik",
         "Isolde", "Jasper", "Katya", "Leopold", "Mirela", "Niklas", "Ottilie", "Pavel",
         "Rosalind", "Silas", "Tamsin", "Valentin", "Wilhelmina", "Yannick", "Zora", "Leif",
         "Anouk")
LAST = ("Achterberg", "Bellamy", "Cavanagh", "Delacroix", "Egerton", "Falkenrath", "Grimaldi",
        "Holloway", "Ingersoll", "Jovanovic", "Kestrel", "Lachance", "Marchetti", "Northcott",
        "Oduya", "Pemberton", "Quarrie", "Rasmussen", "Strickland", "Thorne")
ZIPS = ("11201", "19104", "27601", "33130", "46204", "53202", "63108", "80205", "85004", "97205")
EVERYDAY = ("FreshCart Grocery", "Metro Fuel", "Daily Grind Coffee", "BookNook", "Cinema Nine",
            "GreenLeaf Market", "Brightline Pharmacy", "QuickRide")
SHOPS = {"not_received": ("PetPals", "HomeWorks Hardware", "Urban Outfitters Co",
                          "TechHub Electronics"),
         "wrong_amount": ("Corner Bistro", "Harbor Hotel", "HomeWorks Hardware", "Metro Fuel"),
         "fraud": ("Velvet Arcade Online", "Zentrix Digital", "Nova Gadgets Direct", "Quasar Bets")}
COUNTRIES = ("Brazil", "Kenya", "Vietnam", "Norway", "Peru", "Morocco", "New Zealand", "Thailand")


class Ids:
    """The reserved train ids of task number n: C8nnn, A8nnnk, K8nnnk, T8nnn0kk, D8nnn0 (prior
    dispute) and D8nnn1 (the next dispute the task opens)."""

    def __init__(self, n: int):
        self.n = n
        self.customer = f"C8{n:03d}"
        self.prior_dispute = f"D8{n:03d}0"
        self.next_dispute = f"D8{n:03d}1"

    def account(self, k: int) -> str:
        return f"A8{n3(self.n)}{k}"

    def card(self, k: int) -> str:
        return f"K8{n3(self.n)}{k}"

    def tx(self, k: int) -> str:
        return f"T8{n3(self.n)}0{k:02d}"


def n3(n: int) -> str:
    return f"{n:03d}"


# -- rows ---------------------------------------------------------------------------------------

def person(rng: random.Random, ids: Ids, kyc: int) -> dict:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return {"id": ids.customer, "name": f"{first} {last}",
            "email": f"{first}.{last}.{ids.n}@example.org".lower(),
            "phone": f"555-030-{ids.n:04d}", "zip": rng.choice(ZIPS), "kyc_level": kyc,
            "created_at": "2022-02-01T09:00:00"}


def account(aid: str, cid: str, kind: str, balance: float, limit: float, status="active") -> dict:
    return {"id": aid, "customer_id": cid, "type": kind, "balance": balance, "status": status,
            "daily_transfer_limit": limit, "opened_at": "2022-02-01T09:30:00"}


def card(kid: str, cid: str, aid: str, last4: str, limit: float, status="active") -> dict:
    return {"id": kid, "customer_id": cid, "account_id": aid, "last4": last4, "status": status,
            "spending_limit": limit, "expires": "2029-03", "cancel_reason": None,
            "replaces": None, "updated_at": "2025-05-01T10:00:00"}


def purchase(tid: str, aid: str, kid: str, merchant: str, amount: float, day: date) -> dict:
    return {"id": tid, "account_id": aid, "card_id": kid, "kind": "purchase", "merchant": merchant,
            "amount": amount, "status": "posted", "posted_at": f"{day.isoformat()}T14:20:00"}


def last4s(rng: random.Random, k: int) -> list[str]:
    return [f"{x:04d}" for x in rng.sample(range(1000, 10000), k)]


@dataclass
class Charge:
    """The purchase a dispute template is about. `agreed` is the price the user agreed to when the
    reason is wrong_amount (the overcharge above it is what is disputed), else None."""
    reason: str
    day: date
    charged: float
    agreed: float | None
    disputed: float
    merchant: str


def disputed_charge(rng: random.Random, outcome: str) -> Charge:
    """A charge whose reason, age and amount lead to `outcome` under the dispute policy."""
    reason = ("fraud" if outcome == "fraud" else "not_received" if outcome == "escalate"
              else rng.choice(("not_received", "wrong_amount")))
    age = rng.randint(66, 110) if outcome == "too-old" else rng.randint(3, 55)
    if outcome == "escalate":
        charged = float(rng.choice((2650, 3100, 4475, 5200)))
    elif outcome == "no-credit":
        charged = round(rng.uniform(20, 95), 2)
    else:
        charged = round(rng.uniform(120, 1800), 2)
    agreed = None
    if reason == "wrong_amount":
        # the overcharge is what is disputed: keep it on the intended side of $100.00
        over = round(rng.uniform(5, charged * 0.6), 2) if outcome == "no-credit" else \
            round(rng.uniform(100, max(101, charged * 0.8)), 2) if outcome == "credit" else \
            round(charged / 2, 2)
        agreed = round(charged - over, 2)
    disputed = round(charged - agreed, 2) if agreed is not None else charged
    return Charge(reason, TODAY - timedelta(days=age), charged, agreed, disputed,
                  rng.choice(SHOPS[reason]))


# -- task pieces --------------------------------------------------------------------------------

def identify(rng: random.Random, c: dict) -> tuple[str, str, dict]:
    """How the instruction introduces the user, what the user says to identify themselves, and the
    matching find_customer call: by email, or (30%) by full name and zip code."""
    if rng.random() < 0.7:
        return (f"You are {c['name']} ({c['email']}).", c["email"],
                call("find_customer", email=c["email"]))
    return (f"You are {c['name']}, zip code {c['zip']}; you do not remember your registered email.",
            f"{c['name']}, zip code {c['zip']}",
            call("find_customer", name=c["name"], zip=c["zip"]))
