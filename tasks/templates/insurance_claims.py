"""The claim templates of insurance.py: settling a claim, one split across coverages, a claim on
a lapsed policy, and one driven by an excluded (or removed, or unlisted) driver. Each samples a
situation into a Scene and returns the task's tags, user, checks and gold."""

from __future__ import annotations

from datetime import date, timedelta

from insurance_entities import (
    DEDUCTIBLES,
    MAIN_COVERAGE,
    TODAY,
    Scene,
    denied,
    due,
    identify,
    lookup,
    paid,
    physical,
    who,
)
from taskgen import allow, approx, call, money, only, python_check, row, said, say, user

RENTAL_LIMITS = (600.0, 900.0, 1200.0)
ROADSIDE_LIMITS = (100.0, 150.0, 250.0)
PAY_ME = ("Can you pay out my claim {claim}? The appraiser has seen the car.",
          "I'd like the money for claim {claim}, please.",
          "What happens with my claim {claim}? I want it paid.")


def _asks(s: Scene, c: dict, claim: dict, accept: str) -> tuple[dict, dict]:
    """The user who wants the claim paid, and the gold lookup of who they are."""
    hello, find = identify(s, c)
    return user(f"{who(c)} You want claim {claim['id']} paid. {accept}",
                s.rng.choice(PAY_ME).format(claim=claim["id"]),
                [f"{hello} The claim is {claim['id']}.", "Yes, go ahead.", "Okay, thanks."]), find


def settle_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    drivers = s.household(c, p, rng.choice((0, 1)))
    under = s.ids.variant("settle-claim", ("pay", "pay", "under")) == "under"
    kind = rng.choice(("collision", "glass", "weather", "vandalism", "animal"))
    coverage = MAIN_COVERAGE[kind]
    coverages = physical(s)
    d = rng.choice((1000.0, 2000.0)) if under else rng.choice(DEDUCTIBLES[:3])
    coverages[coverage] = (coverages[coverage][0], d)
    v = s.vehicle(p, coverages)
    amount = round(rng.uniform(150, d - 40) if under else rng.uniform(d + 200, d + 4500), 2)
    driver = rng.choice(drivers) if kind in ("collision", "animal") else None
    claim = s.claim(p, v, TODAY - timedelta(days=rng.randint(6, 40)), kind, driver,
                    {coverage: amount})
    u, find = _asks(s, c, claim, "Accept what the agent says policy allows.")
    gold = lookup(find, c, p, claim)
    if under:
        gold.append(say(f"The appraised {coverage} loss is {money(amount)}, less than your "
                        f"{money(d)} deductible, so the claim pays nothing."))
        checks = [python_check("per-policy", "claim_settled_per_policy", claim_id=claim["id"]),
                  said("told-deductible", d), only(check_id="no-changes")]
        tags = ["claim", "deductible", "policy-trap", "said"]
    else:
        pays, checks, allowed = paid(claim, due(coverages, {coverage: amount}))
        gold += pays + [say(f"Paid {money(amount - d)}: the {money(amount)} estimate less your "
                            f"{money(d)} deductible.")]
        checks.append(only(*allowed))
        tags = ["claim", "pay", "single-write"]
    return {"tags": tags, "user": u, "checks": checks, "gold": gold}


def split_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    drivers = s.household(c, p, rng.choice((0, 1)))
    variant = s.ids.variant("split-claim", ("pay", "review", "approved"))
    coverages = physical(s, float(rng.randint(200, 450) * 100))
    coverages.update(rental=(rng.choice(RENTAL_LIMITS), 0.0),
                     roadside=(rng.choice(ROADSIDE_LIMITS), 0.0))
    v = s.vehicle(p, coverages)
    d = coverages["collision"][1]
    repair = d + (rng.uniform(600, 3000) if variant == "pay" else rng.uniform(5200, 12000))
    estimates = {"collision": round(repair, 2), "rental": float(rng.randint(5, 30) * 35),
                 "roadside": float(rng.choice((85, 120, 165, 240)))}
    amounts = due(coverages, estimates)
    total = round(sum(amounts.values()), 2)
    claim = s.claim(p, v, TODAY - timedelta(days=rng.randint(8, 40)), "collision",
                    rng.choice(drivers), estimates)
    if variant == "approved":
        s.review(claim, total, "approved")
    u, find = _asks(s, c, claim, "If told an adjuster must approve it first, agree to that.")
    gold = lookup(find, c, p, claim)
    if variant == "review":
        gold += [say(f"The payout comes to {money(total)}, over $5,000.00, so an adjuster must "
                     "approve it first. Shall I send it for review?"),
                 call("request_adjuster_review", claim_id=claim["id"], amount=total,
                      reason="repair, rental car and tow", free=("reason",)),
                 say("It's with an adjuster, who decides within 2 business days.")]
        checks = [row("review-filed", "adjuster_reviews", {"claim_id": claim["id"]},
                      {"amount": approx(total), "status": "pending"}),
                  {"id": "nothing-paid", "kind": "absent", "table": "payments",
                   "where": {"claim_id": claim["id"]}},
                  only(allow("adjuster_reviews", {"claim_id": claim["id"]}))]
        tags = ["claim", "split-claim", "adjuster-review", "policy-trap"]
    else:
        pays, checks, allowed = paid(claim, amounts)
        gold += pays + [say(f"Paid {money(total)} in all: " + ", ".join(
            f"{k} {money(a)}" for k, a in amounts.items()) + ".")]
        checks.append(only(*allowed))
        tags = ["claim", "split-claim", "multi-write"] + (["adjuster-review"] if variant ==
                                                          "approved" else [])
    return {"tags": tags, "user": u, "checks": checks, "gold": gold}


def lapsed_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    variant = s.ids.variant("lapsed-claim", ("after-lapse", "before-lapse", "gap"))
    months = rng.choice((2, 3))
    lapse = _lapse_day(months)
    back_on = lapse + timedelta(days=rng.randint(5, 15)) if variant == "gap" else None
    p = s.policy(c, months, back_on)
    drivers = s.household(c, p, rng.choice((0, 1)))
    coverages = physical(s)
    v = s.vehicle(p, coverages)
    if variant == "before-lapse":
        loss = lapse - timedelta(days=rng.randint(2, 20))
    else:
        loss = lapse + timedelta(days=rng.randint(0, ((back_on or TODAY) - lapse).days - 1))
    kind = rng.choice(("collision", "weather", "vandalism"))
    coverage = MAIN_COVERAGE[kind]
    amount = round(coverages[coverage][1] + rng.uniform(300, 3500), 2)
    claim = s.claim(p, v, loss, kind, rng.choice(drivers) if kind == "collision" else None,
                    {coverage: amount})
    u, find = _asks(s, c, claim, "If told it is not covered, ask why once, then accept.")
    gold = lookup(find, c, p, claim)
    if variant == "before-lapse":
        pays, checks, allowed = paid(claim, due(coverages, {coverage: amount}))
        gold += pays + [say(f"The loss on {loss.isoformat()} was before your policy lapsed on "
                            f"{lapse.isoformat()}, so it is covered; the payment is made.")]
        checks.append(only(*allowed))
        tags = ["claim", "lapsed-policy", "pay", "policy-trap"]
    else:
        deny, checks = denied(claim, "not_in_force")
        gold += [say(f"Your policy was not in force on {loss.isoformat()}: it lapsed on "
                     f"{lapse.isoformat()}" + (f" and cover resumed only on {back_on.isoformat()}"
                                               if back_on else "") + ". I have to deny the claim."),
                 *deny, say("The claim is denied.")]
        tags = ["claim", "lapsed-policy", "deny", "policy-trap"]
    return {"tags": tags, "user": u, "checks": checks, "gold": gold}


def _lapse_day(months: int) -> date:
    """The day a policy paid through the end of the month `months` back lapses (16 days on)."""
    paid = TODAY.replace(day=1) - timedelta(days=1)
    for _ in range(months - 1):
        paid = paid.replace(day=1) - timedelta(days=1)
    return paid + timedelta(days=16)


def driver_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    _, kin = s.household(c, p, 1)
    variant = s.ids.variant("driver-claim", ("excluded", "removed", "excluded", "friend"))
    if variant != "friend":
        kin["status"] = variant
    coverages = physical(s)
    v = s.vehicle(p, coverages)
    amount = round(coverages["collision"][1] + rng.uniform(400, 4000), 2)
    claim = s.claim(p, v, TODAY - timedelta(days=rng.randint(5, 30)), "collision",
                    None if variant == "friend" else kin, {"collision": amount})
    u, find = _asks(s, c, claim, ("A friend was driving with your permission. " if variant ==
                                  "friend" else f"{kin['name']} was driving. ")
                    + "Accept what the agent says policy allows.")
    gold = lookup(find, c, p, claim)
    if variant == "excluded":
        deny, checks = denied(claim, "excluded_driver")
        gold += [say(f"{kin['name']} is excluded from your policy, and losses while an excluded "
                     "driver drives are not covered. I have to deny the claim."), *deny]
        tags = ["claim", "excluded-driver", "deny", "policy-trap"]
    else:
        pays, checks, allowed = paid(claim, due(coverages, {"collision": amount}))
        gold += pays + [say("The driver was not excluded, so the loss is covered; the payment "
                            "is made.")]
        checks.append(only(*allowed))
        tags = ["claim", "pay", "driver"] + (["policy-trap"] if variant == "removed" else [])
    return {"tags": tags, "user": u, "checks": checks, "gold": gold}
