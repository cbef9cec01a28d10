"""Training candidates for the insurance domain: 9 templates over sampled policyholders, policies,
vehicles, drivers and claims (insurance_entities.py).

    .venv/bin/python tasks/templates/insurance.py > insurance_train.jsonl

insurance is an out-of-distribution domain: its benchmark (tasks/ood/insurance.jsonl, split `ood`)
measures transfer, so no training pool holds its tasks and these candidates are not committed
under tasks/train. They are here for the opposite experiment (train on insurance, evaluate on the
others) and for the in-domain ceiling; tests/test_domain_insurance.py pins the output byte for
byte and proves every task sound.

Deterministic (one random.Random(SEED), no clock). Every task sets up its own rows in `init`, in the
train id range (C8xxx, P8xxxx, V8xxxx, DR8xxxx, CL8xxxx, AR8xxxx); the benchmark uses 9xxx. Templates,
easiest first:

- quick-withdraw      everything in the first message: withdraw one claim (one call)
- quick-remove-driver everything in the first message: take one driver off (one call)
- change-deductible   a vehicle's deductible to an allowed amount
- file-claim          first notice of loss, with the driver when one drove; or the loss already has
                      a claim (trap: a duplicate)
- settle-claim        pay the estimate less the deductible; or nothing when under it (trap)
- split-claim         repair, rental and tow paid per coverage within limits; over $5,000 only
                      with an approved adjuster review, else a review and no payment (trap)
- lapsed-claim        a loss after the lapse or in a reinstatement gap is denied (trap); one before
                      the lapse date is paid (trap: a lapsed policy still covers it)
- driver-claim        an excluded driver's loss is denied (trap); a removed driver or a friend is
                      covered and paid
- reinstate           within 30 days of the lapse, reinstated for the overdue premium; later,
                      escalated (trap)
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

# taskgen and insurance_entities are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskgen
from insurance_claims import driver_claim, lapsed_claim, settle_claim, split_claim
from insurance_entities import (
    DEDUCTIBLES,
    STORIES,
    TODAY,
    Ids,
    Scene,
    identify,
    lookup,
    physical,
    who,
)
from taskgen import allow, approx, call, money, only, row, said, say, user

SEED = 20260310
PER_TEMPLATE = 12


# -- the easy tier ------------------------------------------------------------------------------

def quick_withdraw(s: Scene) -> dict:
    """Everything in the first message, one call: copy the claim id."""
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    v = s.vehicle(p, physical(s))
    kind = rng.choice(("glass", "vandalism", "weather"))
    claim = s.claim(p, v, TODAY - timedelta(days=rng.randint(2, 20)), kind, None, {})
    why, says = rng.choice((("you paid the repair shop yourself", "I paid the repair shop myself."),
                            ("the damage was smaller than you thought",
                             "The damage was smaller than I thought."),
                            ("you would rather keep your record clean",
                             "I'd rather keep my record clean.")))
    return {"tags": ["claim", "withdraw", "single-call"],
            "user": user(f"{who(c)} You want claim {claim['id']} withdrawn: {why}.",
                         f"Please withdraw my claim {claim['id']}. {says} Yes, go ahead.",
                         ["Yes, please withdraw it."]),
            "checks": [row("withdrawn", "claims", {"id": claim["id"]}, {"status": "withdrawn"}),
                       only(allow("claims", {"id": claim["id"]}))],
            "gold": [call("withdraw_claim", claim_id=claim["id"])]}


def quick_remove_driver(s: Scene) -> dict:
    """Everything in the first message, one call: copy the driver id."""
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    s.vehicle(p, physical(s))
    target = rng.choice(s.household(c, p, rng.choice((1, 2)))[1:])
    why = rng.choice(("moved out", "got their own car and policy", "moved abroad"))
    return {"tags": ["driver", "single-call"],
            "user": user(f"{who(c)} {target['name']} ({target['id']}) {why} and should come off "
                         f"policy {p['id']}.",
                         f"Please remove driver {target['id']} ({target['name']}) from my policy "
                         f"{p['id']}; they {why}. Yes, go ahead.", ["Yes, remove them."]),
            "checks": [row("removed", "drivers", {"id": target["id"]}, {"status": "removed"}),
                       only(allow("drivers", {"id": target["id"]}))],
            "gold": [call("remove_driver", driver_id=target["id"])]}


# -- policy changes and new claims ---------------------------------------------------------------

def change_deductible(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    cars = [s.vehicle(p, physical(s)) for _ in range(rng.choice((1, 2)))]
    v = rng.choice(cars)
    kind = rng.choice(("collision", "comprehensive"))
    old = next(r for r in s.init["coverages"] if r["vehicle_id"] == v["id"] and r["kind"] == kind)
    new = rng.choice([d for d in DEDUCTIBLES if d != old["deductible"]])
    odd = s.ids.variant("change-deductible", ("plain", "odd")) == "odd"
    asked = new + 250 if odd and new < 2000 else new
    hello, find = identify(s, c)
    gold = lookup(find, c, p)
    if asked != new:
        gold.append(say(f"Deductibles can be {', '.join(money(d) for d in DEDUCTIBLES)}. Which "
                        "one would you like?"))
    gold += [call("change_deductible", vehicle_id=v["id"], coverage=kind, deductible=int(new)),
             say(f"The {kind} deductible on your {v['label']} is now {money(new)}.")]
    return {"tags": ["deductible", "single-write"] + (["user-info"] if asked != new else []),
            "user": user(f"{who(c)} You want the {kind} deductible on your {v['label']} set to "
                         f"{money(asked)}." + (f" If that amount is not offered, take "
                                               f"{money(new)}." if asked != new else ""),
                         f"I'd like to change the {kind} deductible on my {v['label']}.",
                         [f"{hello} Make it {money(asked)}.",
                          f"Then {money(new)}, please. Yes." if asked != new else "Yes, please."]),
            "checks": [row("deductible", "coverages", {"vehicle_id": v["id"], "kind": kind},
                           {"deductible": new}),
                       only(allow("coverages", {"vehicle_id": v["id"], "kind": kind}))],
            "gold": gold}


def file_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    p = s.policy(c)
    drivers = s.household(c, p, rng.choice((0, 1)))
    cars = [s.vehicle(p, physical(s)) for _ in range(rng.choice((1, 2)))]
    v = rng.choice(cars)
    variant = s.ids.variant("file-claim", ("no-driver", "driver", "duplicate"))
    kind = "collision" if variant == "driver" else rng.choice(("weather", "glass", "vandalism",
                                                                "theft"))
    driver = rng.choice(drivers) if variant == "driver" else None
    loss = TODAY - timedelta(days=rng.randint(1, 9))
    story = rng.choice(STORIES[kind])
    hello, find = identify(s, c)
    when = f"{loss:%B} {loss.day}, {loss.year}"
    drove = f" {driver['name']} was driving." if driver else ""
    gold = lookup(find, c, p)
    if variant == "duplicate":
        old = s.claim(p, v, loss, kind, None, {})
        gold += [call("list_claims", policy_id=p["id"]),
                 say(f"Your {v['label']} already has claim {old['id']} for {loss.isoformat()}; "
                     "I won't open a second one.")]
        checks = [{"id": "one-claim", "kind": "count", "table": "claims",
                   "where": {"vehicle_id": v["id"], "loss_date": loss.isoformat()}, "expect": 1},
                  said("told-claim", old["id"]), only(check_id="no-changes")]
    else:
        gold += [call("file_claim", policy_id=p["id"], vehicle_id=v["id"],
                      loss_date=loss.isoformat(), loss_type=kind, description=story,
                      **({"driver_id": driver["id"]} if driver else {}), free=("description",)),
                 say("Your claim is filed; an appraiser will estimate it within 3 business days.")]
        checks = [row("filed", "claims", {"vehicle_id": v["id"], "loss_date": loss.isoformat()},
                      {"loss_type": kind, "status": "open",
                       "driver_id": driver["id"] if driver else {"is_null": True}}),
                  only(allow("claims", {"vehicle_id": v["id"]}))]
    return {"tags": ["claim", "file"] + (["policy-trap", "said"] if variant == "duplicate"
                                         else ["single-write"]),
            "user": user(f"{who(c)} On {loss.isoformat()} your {v['label']} was damaged: {story}."
                         f"{drove} You want to report it."
                         + (" You may have reported it already in the app." if variant ==
                            "duplicate" else ""),
                         f"I need to report damage to my {v['label']}.",
                         [f"{hello} It happened on {when}: {story}.{drove}", "Yes, file it.",
                          "Thanks."]),
            "checks": checks, "gold": gold}


# -- the policy ---------------------------------------------------------------------------------

def reinstate(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    late = s.ids.variant("reinstate", ("recent", "too-late")) == "too-late"
    months = rng.choice((3, 4)) if late else 2
    p = s.policy(c, months)
    s.household(c, p, rng.choice((0, 1)))
    s.vehicle(p, physical(s))
    lapse, owed = p["lapsed_on"], round(months * p["monthly_premium"], 2)
    hello, find = identify(s, c)
    gold = lookup(find, c, p)
    if late:
        gold += [say(f"Your policy lapsed on {lapse}, more than 30 days ago, so it can't be "
                     "reinstated. I'll pass you to sales for a new policy."),
                 call("escalate", summary=f"Policy {p['id']} lapsed on {lapse}, past the 30-day "
                                          "reinstatement window; customer wants cover again.",
                      customer_id=c["id"], reference=p["id"], free=("summary",))]
        checks = [row("still-lapsed", "policies", {"id": p["id"]}, {"status": "lapsed"}),
                  {"id": "escalated", "kind": "count", "table": "escalations",
                   "where": {"customer_id": c["id"], "reference": {"any_of": [p["id"], None]}},
                   "expect": 1},
                  only(allow("escalations", {"customer_id": c["id"]}))]
        tags = ["policy", "reinstate", "policy-trap", "escalate"]
    else:
        gold += [say(f"Reinstating charges the overdue premium of {money(owed)}; losses from "
                     f"{lapse} until today stay uncovered. Shall I go ahead?"),
                 call("reinstate_policy", policy_id=p["id"]),
                 say(f"Your policy is active again; {money(owed)} was charged.")]
        checks = [row("reinstated", "policies", {"id": p["id"]},
                      {"status": "active", "reinstated_on": TODAY.isoformat()}),
                  row("premium-charged", "premium_payments", {"policy_id": p["id"]},
                      {"amount": approx(owed)}),
                  said("told-amount", owed),
                  only(allow("policies", {"id": p["id"]}),
                       allow("premium_payments", {"policy_id": p["id"]}))]
        tags = ["policy", "reinstate", "said"]
    return {"tags": tags,
            "user": user(f"{who(c)} Your policy {p['id']} lapsed because you missed premiums. You "
                         "want it active again and will pay what is owed. If told that is not "
                         "possible, accept being passed to sales.",
                         rng.choice(("My car insurance lapsed, can I get it back?",
                                     f"I want to reinstate my policy {p['id']}.")),
                         [f"{hello} Policy {p['id']}.", "Yes, go ahead.", "Okay, thank you."]),
            "checks": checks, "gold": gold}


TEMPLATES = {
    "quick-withdraw": quick_withdraw, "quick-remove-driver": quick_remove_driver,
    "change-deductible": change_deductible, "file-claim": file_claim,
    "settle-claim": settle_claim, "split-claim": split_claim, "lapsed-claim": lapsed_claim,
    "driver-claim": driver_claim, "reinstate": reinstate,
}


if __name__ == "__main__":
    taskgen.print_jsonl(taskgen.generate("insurance", TEMPLATES, PER_TEMPLATE, SEED, Scene, Ids()))
