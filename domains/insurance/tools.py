"""Auto insurance tools. Each is a typed function: the signature and docstring are what the agent
sees.

The tools enforce what a policy administration system enforces itself: a claim belongs to a
vehicle of its policy, a payment goes to an open claim under a coverage the vehicle has and never
exceeds the appraised estimate, each coverage of a claim is paid once, a reinstatement needs a
lapsed policy. The rules in policy.md that are *not* enforced here are the traps, verified by the
task checks:

- pay_claim does not look at the policy's lapse, the driver's exclusion, the deductible, the
  coverage limit or the $5,000.00 adjuster threshold: it pays whatever amount up to the estimate;
- deny_claim denies any open claim, covered or not;
- reinstate_policy reinstates a policy lapsed for any number of days;
- file_claim files a second claim for the same vehicle and loss date;
- add_driver lists a driver the policy excludes under another row.

Money is REAL dollars with 2 decimals; amounts are rounded to the cent on the way in.
"""

from datetime import date, timedelta
from typing import Literal

from endstate.api import (
    Db,
    ToolError,
    customer_finder,
    escalator,
    iso_date,
    positive_cents,
    tool,
)

NOW = "2026-03-10T10:00:00"
# the tools' bookkeeping timestamp: a task's reward does not hang on it (core.grading.footprint)
FREE = ("updated_at",)

# Example turns shown to token-level agents before the conversation (few-shot). Small models emit
# well-formed tool calls only after seeing a few. The entities are fictional: no task uses them.
EXAMPLES = [
    {"user": "Hi, it's ines.moll@example.com. I have a question about my car insurance.",
     "tool": "find_customer", "arguments": {"email": "ines.moll@example.com"},
     "result": {"customer_id": "C0000"}, "reply": "Thanks, I found your profile."},
    {"user": "What's the status of claim CL00002?",
     "tool": "get_claim", "arguments": {"claim_id": "CL00002"},
     "result": {"id": "CL00002", "status": "open", "loss_type": "glass"},
     "reply": "Claim CL00002 is open."},
    {"user": "Please withdraw claim CL00003, I paid the repair myself.",
     "tool": "withdraw_claim", "arguments": {"claim_id": "CL00003"},
     "result": {"claim_id": "CL00003", "status": "withdrawn"},
     "reply": "Claim CL00003 is withdrawn."},
]
MAX_AGE = 120  # years: a birth date before that is a typo, after today no birth date
Coverage = Literal["liability", "collision", "comprehensive", "rental", "roadside"]
LossType = Literal["collision", "theft", "weather", "glass", "vandalism", "animal"]


def _open_claim(db: Db, claim_id: str) -> dict:
    claim = db.get("claims", claim_id, "claim")
    if claim["status"] != "open":
        raise ToolError(f"claim {claim_id} is {claim['status']}")
    return claim


def overdue_premium(policy: dict, today: str) -> tuple[float, str]:
    """(premium owed to bring the policy paid through the end of this month, that month end)."""
    paid = date.fromisoformat(policy["paid_through"])
    now = date.fromisoformat(today)
    months = (now.year - paid.year) * 12 + now.month - paid.month
    month_end = (now.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    return round(max(months, 0) * policy["monthly_premium"], 2), month_end.isoformat()


# -- lookups ------------------------------------------------------------------------------------

find_customer = customer_finder("Oskar Lindqvist")


@tool
def get_customer(db: Db, customer_id: str) -> dict:
    """Get a policyholder's profile and their policies.

    Args:
        customer_id: The customer id, e.g. "C0042".
    """
    customer = db.get("customers", customer_id, "customer")
    customer["policies"] = db.all(
        "SELECT id, status, effective_date, expiration_date, monthly_premium, paid_through "
        "FROM policies WHERE customer_id = ? ORDER BY id", customer_id)
    return customer


@tool
def get_policy(db: Db, policy_id: str) -> dict:
    """Get a policy: its term, premium and lapse dates, its vehicles with their coverages (limit
    and deductible), and its drivers (listed, excluded or removed).

    Args:
        policy_id: The policy id, e.g. "P00042".
    """
    policy = db.get("policies", policy_id, "policy")
    if policy["status"] == "lapsed":
        policy["overdue_premium"] = overdue_premium(policy, db.today)[0]
    policy["vehicles"] = db.all("SELECT id, vin, year, make, model FROM vehicles "
                                "WHERE policy_id = ? ORDER BY id", policy_id)
    for vehicle in policy["vehicles"]:
        vehicle["coverages"] = db.all("SELECT kind, limit_amount, deductible FROM coverages "
                                      "WHERE vehicle_id = ? ORDER BY kind", vehicle["id"])
    policy["drivers"] = db.all("SELECT id, name, birth_date, status FROM drivers "
                               "WHERE policy_id = ? ORDER BY id", policy_id)
    return policy


@tool
def list_claims(db: Db, policy_id: str) -> list:
    """List a policy's claims, newest loss first.

    Args:
        policy_id: The policy id.
    """
    db.get("policies", policy_id, "policy")
    return db.all("SELECT id, vehicle_id, loss_date, loss_type, status FROM claims "
                  "WHERE policy_id = ? ORDER BY loss_date DESC, id DESC", policy_id)


@tool
def get_claim(db: Db, claim_id: str) -> dict:
    """Get a claim with the appraiser's estimates per coverage, its payments and its adjuster
    reviews.

    Args:
        claim_id: The claim id, e.g. "CL00042".
    """
    claim = db.get("claims", claim_id, "claim")
    claim["estimates"] = db.all("SELECT coverage, amount, note FROM estimates WHERE claim_id = ? "
                                "ORDER BY coverage", claim_id)
    claim["payments"] = db.all("SELECT id, coverage, amount, created_at FROM payments "
                               "WHERE claim_id = ? ORDER BY id", claim_id)
    claim["adjuster_reviews"] = db.all("SELECT id, amount, status, created_at FROM "
                                       "adjuster_reviews WHERE claim_id = ? ORDER BY id", claim_id)
    return claim


# -- claims -------------------------------------------------------------------------------------

@tool(writes=True)
def file_claim(db: Db, policy_id: str, vehicle_id: str, loss_date: str, loss_type: LossType,
               description: str, driver_id: str | None = None) -> dict:
    """Report a new loss (first notice of loss). An appraiser estimates it within 3 business days.

    Args:
        policy_id: The policy id.
        vehicle_id: The damaged or stolen vehicle.
        loss_date: The day of the loss (YYYY-MM-DD), today or earlier.
        loss_type: collision (with a vehicle or object), theft, weather (hail, flood, storm),
            glass (windshield or windows only), vandalism, animal (hitting a deer or similar).
        description: What happened, in the customer's words.
        driver_id: The driver on the policy who was driving, if any (none for theft or a parked car).
    """
    db.get("policies", policy_id, "policy")
    vehicle = db.get("vehicles", vehicle_id, "vehicle")
    if vehicle["policy_id"] != policy_id:
        raise ToolError(f"vehicle {vehicle_id} is not on policy {policy_id}")
    day = iso_date(loss_date, "loss_date")
    if day > db.today:
        raise ToolError(f"loss_date {day} is in the future")
    if driver_id is not None:
        driver = db.get("drivers", driver_id, "driver")
        if driver["policy_id"] != policy_id:
            raise ToolError(f"driver {driver_id} is not on policy {policy_id}")
    claim_id = db.next_id("claims", "CL", 5)
    db.run("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, 'open', NULL, ?, ?)", claim_id,
           policy_id, vehicle_id, driver_id, day, loss_type, description.strip(), db.now, db.now)
    return {"claim_id": claim_id, "status": "open",
            "next_step": "an appraiser estimates the loss within 3 business days"}


@tool(writes=True)
def pay_claim(db: Db, claim_id: str, coverage: Coverage, amount: float) -> dict:
    """Pay a claim under one of the vehicle's coverages. Each coverage of a claim is paid once.

    Args:
        claim_id: The claim id.
        coverage: The coverage the payment falls under.
        amount: The amount paid, in dollars, after the deductible and within the limit.
    """
    claim = _open_claim(db, claim_id)
    amount = positive_cents(amount)
    if not db.one("SELECT kind FROM coverages WHERE vehicle_id = ? AND kind = ?",
                  claim["vehicle_id"], coverage):
        raise ToolError(f"vehicle {claim['vehicle_id']} has no {coverage} coverage")
    estimate = db.value("SELECT amount FROM estimates WHERE claim_id = ? AND coverage = ?",
                        claim_id, coverage)
    if estimate is None:
        raise ToolError(f"claim {claim_id} has no {coverage} estimate yet; an appraiser must "
                        "estimate the loss first")
    if amount > estimate:
        raise ToolError(f"the payment cannot exceed the {coverage} estimate of {estimate:,.2f}")
    if db.one("SELECT id FROM payments WHERE claim_id = ? AND coverage = ?", claim_id, coverage):
        raise ToolError(f"claim {claim_id} was already paid under {coverage}")
    payment_id = db.next_id("payments", "PY", 5)
    db.run("INSERT INTO payments VALUES (?, ?, ?, ?, ?)", payment_id, claim_id, coverage, amount,
           db.now)
    db.run("UPDATE claims SET updated_at = ? WHERE id = ?", db.now, claim_id)
    return {"payment_id": payment_id, "claim_id": claim_id, "coverage": coverage,
            "amount": amount}


@tool(writes=True)
def deny_claim(db: Db, claim_id: str,
               reason: Literal["not_in_force", "excluded_driver", "not_covered"]) -> dict:
    """Deny a claim that the policy does not pay.

    Args:
        claim_id: The claim id.
        reason: not_in_force (the policy was not in force on the loss date), excluded_driver (a
            driver the policy excludes was driving), not_covered (the vehicle lacks the coverage
            the loss needs).
    """
    _open_claim(db, claim_id)
    if db.one("SELECT id FROM payments WHERE claim_id = ?", claim_id):
        raise ToolError(f"claim {claim_id} already has payments")
    db.run("UPDATE claims SET status = 'denied', denial_reason = ?, updated_at = ? WHERE id = ?",
           reason, db.now, claim_id)
    return {"claim_id": claim_id, "status": "denied", "reason": reason}


@tool(writes=True)
def withdraw_claim(db: Db, claim_id: str) -> dict:
    """Withdraw an open claim at the customer's request (only before anything is paid).

    Args:
        claim_id: The claim id, e.g. "CL00042".
    """
    _open_claim(db, claim_id)
    if db.one("SELECT id FROM payments WHERE claim_id = ?", claim_id):
        raise ToolError(f"claim {claim_id} already has payments and cannot be withdrawn")
    db.run("UPDATE claims SET status = 'withdrawn', updated_at = ? WHERE id = ?", db.now, claim_id)
    return {"claim_id": claim_id, "status": "withdrawn"}


@tool(writes=True)
def request_adjuster_review(db: Db, claim_id: str, amount: float, reason: str) -> dict:
    """Ask a claims adjuster to approve a payout (they decide within 2 business days).

    Args:
        claim_id: The claim id.
        amount: The claim's total payout to approve, all coverages together, in dollars.
        reason: What the payout is made of.
    """
    _open_claim(db, claim_id)
    amount = positive_cents(amount)
    if db.one("SELECT id FROM adjuster_reviews WHERE claim_id = ? AND status = 'pending'",
              claim_id):
        raise ToolError(f"claim {claim_id} already has a pending adjuster review")
    review_id = db.next_id("adjuster_reviews", "AR", 5)
    db.run("INSERT INTO adjuster_reviews VALUES (?, ?, ?, ?, 'pending', ?, NULL)", review_id,
           claim_id, amount, reason.strip(), db.now)
    return {"review_id": review_id, "status": "pending"}


# -- the policy ---------------------------------------------------------------------------------

@tool(writes=True)
def reinstate_policy(db: Db, policy_id: str) -> dict:
    """Reinstate a lapsed policy: charges the overdue premium through the end of this month and
    resumes cover from today.

    Args:
        policy_id: The policy id.
    """
    policy = db.get("policies", policy_id, "policy")
    if policy["status"] != "lapsed":
        raise ToolError(f"policy {policy_id} is {policy['status']}, not lapsed")
    owed, through = overdue_premium(policy, db.today)
    payment_id = db.next_id("premium_payments", "PP", 6)
    db.run("INSERT INTO premium_payments VALUES (?, ?, ?, ?, ?)", payment_id, policy_id, owed,
           through, db.now)
    db.run("UPDATE policies SET status = 'active', paid_through = ?, reinstated_on = ?, "
           "updated_at = ? WHERE id = ?", through, db.today, db.now, policy_id)
    return {"policy_id": policy_id, "status": "active", "charged": owed, "paid_through": through,
            "uncovered": f"{policy['lapsed_on']} to {date.fromisoformat(db.today) - timedelta(days=1)}"}


@tool(writes=True)
def change_deductible(db: Db, vehicle_id: str, coverage: Literal["collision", "comprehensive"],
                      deductible: Literal[250, 500, 1000, 2000]) -> dict:
    """Change a vehicle's collision or comprehensive deductible, from today on.

    Args:
        vehicle_id: The vehicle id.
        coverage: collision or comprehensive.
        deductible: The new deductible in dollars.
    """
    row = db.one("SELECT deductible FROM coverages WHERE vehicle_id = ? AND kind = ?", vehicle_id,
                 coverage)
    if row is None:
        raise ToolError(f"vehicle {vehicle_id} has no {coverage} coverage")
    if row["deductible"] == deductible:
        raise ToolError(f"the {coverage} deductible is already {deductible:,.2f}")
    db.run("UPDATE coverages SET deductible = ?, updated_at = ? WHERE vehicle_id = ? AND kind = ?",
           float(deductible), db.now, vehicle_id, coverage)
    return {"vehicle_id": vehicle_id, "coverage": coverage, "old_deductible": row["deductible"],
            "deductible": float(deductible)}


@tool(writes=True)
def add_driver(db: Db, policy_id: str, name: str, license_number: str, birth_date: str) -> dict:
    """List a new driver on a policy.

    Args:
        policy_id: The policy id.
        name: The driver's full name.
        license_number: The driver's license number.
        birth_date: The driver's birth date (YYYY-MM-DD).
    """
    db.get("policies", policy_id, "policy")
    born = iso_date(birth_date, "birth_date", earliest=f"{int(db.today[:4]) - MAX_AGE}-01-01",
                    latest=db.today)
    driver_id = db.next_id("drivers", "DR", 5)
    db.run("INSERT INTO drivers VALUES (?, ?, ?, ?, ?, 'listed', ?)", driver_id, policy_id,
           name.strip(), license_number.strip().upper(), born, db.now)
    return {"driver_id": driver_id, "status": "listed"}


@tool(writes=True)
def remove_driver(db: Db, driver_id: str) -> dict:
    """Take a listed driver off their policy.

    Args:
        driver_id: The driver id, e.g. "DR00042".
    """
    driver = db.get("drivers", driver_id, "driver")
    if driver["status"] != "listed":
        raise ToolError(f"driver {driver_id} is {driver['status']}, not listed")
    db.run("UPDATE drivers SET status = 'removed', updated_at = ? WHERE id = ?", db.now, driver_id)
    return {"driver_id": driver_id, "status": "removed"}


escalate = escalator("policy, vehicle, driver or claim")
