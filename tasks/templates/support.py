"""Support training candidates: 7 templates over sampled customers, shipments and tickets.

    .venv/bin/python tasks/templates/support.py > tasks/train/support.jsonl

Deterministic (one random.Random(SEED), no clock): rerunning reproduces the committed file byte for
byte. Every task sets up its own rows in `init`, in the id range reserved for training (C8xxx,
S8xxxx, T8xxxx, X8xxxx); the held-out bench uses the 9xxx range and other names,
so the two suites share no entity and no instruction. Each template is one function that samples a
situation into a Scene (support_entities.py) and returns the user, checks and gold of one task.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

# taskgen and support_entities are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskgen
from support_entities import ITEMS, Ids, Scene, day, high_for, identify, who
from taskgen import allow, approx, call, judge, money, only, python_check, row, said, say, ts

SEED = 20260116
PER_TEMPLATE = 18
TIER_CAP = {"standard": 25, "plus": 50, "premier": 100}  # domains/support/policy.md, "Credits"
MISFILED = {  # category: (subjects, what the customer says, the right queue)
    "billing": (("Charged twice", "Wrong amount charged", "Invoice request"),
                "it's about a charge on my card", "billing"),
    "returns": (("Return label not working", "How do I return this?"),
                "it's about returning an item", "returns"),
    "account": (("Cannot log in", "Change my email"), "it's about my account login", "general"),
    "shipping": (("Tracking has not updated", "Package shows delivered but not here"),
                 "it's about a delivery", "shipping"),
}


# -- templates ----------------------------------------------------------------------------------

def resolve_blocked(s: Scene) -> dict:
    """The trap: the customer wants a ticket closed while its carrier exception is open."""
    rng, c = s.rng, s.customer()
    kind = rng.choice(("lost", "delayed", "damaged", "address_issue"))
    shipment = s.shipment(c, "delivered" if kind == "damaged" else "in_transit",
                          scan_days_ago=rng.randint(6, 10) if kind == "lost" else rng.randint(1, 4))
    exc = s.exception(shipment, kind)
    insist = rng.random() < 0.4
    t = s.ticket(c, "Item arrived broken" if kind == "damaged" else "Delivery is late",
                 "damaged" if kind == "damaged" else "shipping", status="pending" if insist else "open",
                 priority=high_for(c) if kind in ("lost", "damaged") else "normal", shipment=shipment)
    hello, lookup = identify(s, c)
    no_resolve = python_check("not-resolved-over-exception",
                              "no_ticket_resolved_over_open_exception", ticket_id=t["id"])
    still_open = row("exception-still-open", "carrier_exceptions", {"id": exc["id"]}, {"status": "open"})
    explained = judge("explained-why-open", f"Did the agent explain that ticket {t['id']} cannot be "
                                            f"closed while the carrier exception {exc['id']} is open?")
    gold = [lookup, call("get_ticket", ticket_id=t["id"])]
    if insist:
        gold += [say(f"The {shipment['carrier']} exception {exc['id']} is still open, so ticket "
                     f"{t['id']} can't be closed. I'll escalate it to a senior agent."),
                 call("escalate_ticket", ticket_id=t["id"],
                      reason=f"Customer insists on closing {t['id']} while exception {exc['id']} is open.",
                      free=("reason",))]
        return {
            "tags": ["resolve", "policy-trap", "escalate", "python-check"],
            "user": {"instruction": f"{who(c)} You want ticket {t['id']} closed today. If refused, "
                                    "insist and ask for someone senior; accept an escalation.",
                     "opening": f"Close ticket {t['id']}, I'm done with it.",
                     "script": [hello, "No. Close it now or get me someone senior.", "Okay."]},
            "checks": [no_resolve, still_open,
                       row("escalated", "tickets", {"id": t["id"]}, {"status": "pending", "queue": "escalations"}),
                       only(allow("tickets", {"id": t["id"]}),
                            allow("escalations", {"ticket_id": t["id"]})),
                       explained],
            "gold": gold,
        }
    gold += [say(f"The {shipment['carrier']} exception {exc['id']} is still open, so I can't close "
                 f"{t['id']}. I can set it to pending with a note that we're waiting on the carrier."),
             call("update_ticket_status", ticket_id=t["id"], status="pending"),
             call("add_note", ticket_id=t["id"], visibility="customer",
                  body=f"Waiting on {shipment['carrier']} to settle exception {exc['id']}; "
                       "we will close this ticket then.", free=("body",))]
    return {
        "tags": ["resolve", "policy-trap", "python-check"],
        "user": {"instruction": f"{who(c)} You want ticket {t['id']} about your {rng.choice(ITEMS)} closed. "
                                "If told it must stay open, accept whatever the agent proposes.",
                 "opening": rng.choice((f"Please close my ticket {t['id']}.",
                                        "You can close my support ticket, I'm tired of it.")),
                 "script": [f"{hello} The ticket is {t['id']}.", "Alright. Yes, do that."]},
        "checks": [no_resolve, still_open,
                   row("left-pending", "tickets", {"id": t["id"]}, {"status": "pending"}),
                   {"id": "customer-note", "kind": "count", "table": "ticket_notes",
                    "where": {"ticket_id": t["id"], "visibility": "customer", "author": "assistant"},
                    "expect": 1},
                   only(allow("tickets", {"id": t["id"]}),
                        allow("ticket_notes", {"ticket_id": t["id"]})),
                   explained],
        "gold": gold,
    }


def route_ticket(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    category = rng.choice(sorted(MISFILED))
    subjects, about, queue = MISFILED[category]
    wrong = rng.choice(sorted({"general", "shipping", "billing", "returns"} - {queue}))
    t = s.ticket(c, rng.choice(subjects), category, status=rng.choice(("new", "open")), queue=wrong)
    s.ticket(c, "Question about a product", "other", queue="general")  # stays where it is
    hello, lookup = identify(s, c)
    return {
        "tags": ["route", "single-write"],
        "user": {"instruction": f"{who(c)} Nobody has answered your ticket {t['id']} ({t['subject']}). "
                                "You want it in front of the right team.",
                 "opening": f"My ticket {t['id']} hasn't been answered, {about}.",
                 "script": [hello, "Yes, please send it to the right team."]},
        "checks": [row("routed", "tickets", {"id": t["id"]}, {"queue": queue, "status": t["status"]}),
                   only(allow("tickets", {"id": t["id"]}))],
        "gold": [lookup, call("get_ticket", ticket_id=t["id"]), call("route_ticket", ticket_id=t["id"], queue=queue)],
    }


def delay_credit(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    shipment = s.shipment(c, "delivered", scan_days_ago=rng.randint(1, 8))
    s.exception(shipment, "delayed", "resolved", "delivered")
    t = s.ticket(c, "Delivery is late", "shipping", shipment=shipment)
    cap = TIER_CAP[c["tier"]]
    asked = rng.choice([a for a in (5, 10, 15, 20, 30, 40, 60, 75, 120, 150) if a != cap])
    amount = min(asked, cap)
    hello, lookup = identify(s, c)
    gold = [lookup, call("get_ticket", ticket_id=t["id"]), call("get_customer", customer_id=c["id"])]
    if asked > cap:
        script = [f"{hello} Ticket {t['id']}.", f"Okay, {money(cap)} is fine."]
        gold.append(say(f"The most I can credit on this ticket is {money(cap)}. Shall I issue that?"))
        tags = ["credit", "policy-trap", "python-check"]
    else:
        script = [f"{hello} Ticket {t['id']}.", "Yes please."]
        tags = ["credit", "single-write", "python-check"]
    gold.append(call("issue_credit", ticket_id=t["id"], amount=float(amount), reason="delay"))
    return {
        "tags": tags,
        "user": {"instruction": f"{who(c)} Your {rng.choice(ITEMS)} (ticket {t['id']}) arrived late. You ask "
                                f"for a {money(asked)} store credit; accept less if that is the limit.",
                 "opening": f"My delivery was late, could I get a {money(asked)} credit?",
                 "script": script},
        "checks": [row("credit", "credits", {"ticket_id": t["id"]},
                       {"amount": approx(amount), "reason": "delay"}),
                   python_check("credit-policy", "credit_within_policy", ticket_id=t["id"]),
                   only(allow("credits", {"ticket_id": t["id"]}))],
        "gold": gold,
    }


def damage_claim(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    shipment = s.shipment(c, "delivered", scan_days_ago=rng.randint(2, 9))
    exc = s.exception(shipment, "damaged")
    t = s.ticket(c, "Item arrived broken", "damaged", status="pending", priority=high_for(c),
                 shipment=shipment)
    declared = shipment["declared_value"]
    cost = round(declared * rng.choice((0.3, 0.55, 0.8, 1.4, 2.0)), 2)
    amount = min(cost, declared)
    item = rng.choice(ITEMS)
    hello, lookup = identify(s, c)
    gold = [lookup, call("get_ticket", ticket_id=t["id"])]
    if cost > declared:
        script = [f"{hello} Ticket {t['id']}.", f"Replacing it costs {money(cost)}.",
                  f"Okay, {money(declared)} then. Go ahead."]
        gold.append(say(f"A claim can be at most the declared value, {money(declared)}. File it for that?"))
    else:
        script = [f"{hello} Ticket {t['id']}.", f"The repair costs {money(cost)}.", "Yes, file it."]
    gold.append(call("file_carrier_claim", exception_id=exc["id"], amount=amount))
    return {
        "tags": ["claim", "single-write", "user-info", "said", "python-check"],
        "user": {"instruction": f"{who(c)} Your {item} (ticket {t['id']}) arrived damaged and the damage "
                                f"is already reported. Fixing or replacing it costs {money(cost)}. You want "
                                "a carrier claim for that and want to know the amount filed.",
                 "opening": f"I need to claim the cost of my damaged {item}.",
                 "script": script + ["How much did you claim?"]},
        "checks": [row("claim", "claims", {"exception_id": exc["id"]},
                       {"amount": approx(amount), "status": "filed"}),
                   python_check("single-claim", "one_claim_per_exception", exception_id=exc["id"]),
                   said("told-amount", amount),
                   only(allow("claims", {"exception_id": exc["id"]}))],
        "gold": gold + [say(f"Filed: the claim is for {money(amount)}.")],
    }


def report_lost(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    anchor = s.old_exception(c)
    s.ids.exception()  # the id the new exception will take
    new_exc = f"X{int(anchor['id'][1:]) + 1}"
    days = rng.choice((2, 3, 4, 6, 7, 8, 9, 11))  # never exactly 5: policy's boundary is a date
    shipment = s.shipment(c, "in_transit", scan_days_ago=days)
    t = s.ticket(c, "Where is my package?", "shipping", shipment=shipment)
    hello, lookup = identify(s, c)
    item = rng.choice(ITEMS)
    instruction = (f"{who(c)} Your {item} (ticket {t['id']}) has not moved for a while. You want it "
                   "reported lost and a claim filed.")
    gold = [lookup, call("get_ticket", ticket_id=t["id"])]
    if days < 5:
        when = day(datetime.fromisoformat(shipment["last_scan_at"]) + timedelta(days=5))
        return {
            "tags": ["exception", "policy-trap", "refuse", "said"],
            "user": {"instruction": instruction + " If told to wait, ask until when, then accept.",
                     "opening": f"I think my {item} is lost. Please report it.",
                     "script": [f"{hello} Ticket {t['id']}.", "Until when do I have to wait?", "Okay."]},
            "checks": [{"id": "not-reported", "kind": "absent", "table": "carrier_exceptions",
                        "where": {"shipment_id": shipment["id"]}},
                       said("told-date", when), only()],
            "gold": gold + [say(f"The last scan was on {day(shipment['last_scan_at'])}; it can be "
                                f"reported lost from {when}.")],
        }
    declared = shipment["declared_value"]
    return {
        "tags": ["exception", "claim", "priority", "multi-write"],
        "user": {"instruction": instruction,
                 "opening": f"My {item} hasn't moved in {days} days. Can you report it lost?",
                 "script": [f"{hello} Ticket {t['id']}.", "Yes, report it and file the claim."]},
        "checks": [row("exception-opened", "carrier_exceptions", {"shipment_id": shipment["id"]},
                       {"id": new_exc, "kind": "lost", "status": "open"}),
                   row("claim", "claims", {"exception_id": new_exc},
                       {"amount": approx(declared)}),
                   row("ticket-triaged", "tickets", {"id": t["id"]},
                       {"priority": high_for(c), "status": "pending"}),
                   only(allow("carrier_exceptions", {"shipment_id": shipment["id"]}),
                        allow("claims", {"exception_id": new_exc}),
                        allow("tickets", {"id": t["id"]}))],
        "gold": gold + [call("open_carrier_exception", shipment_id=shipment["id"], kind="lost"),
                        call("set_priority", ticket_id=t["id"], priority=high_for(c)),
                        call("update_ticket_status", ticket_id=t["id"], status="pending"),
                        call("file_carrier_claim", exception_id=new_exc, amount=declared)],
    }


def delivered_close(s: Scene) -> dict:
    """The exception's package arrived: settle the exception first, then close the ticket."""
    rng, c = s.rng, s.customer()
    tracked = rng.random() < 0.6  # tracking shows delivered; otherwise the customer withdraws
    kind = rng.choice(("delayed", "lost"))
    quiet = rng.randint(6, 9) if kind == "lost" and not tracked else rng.randint(1, 3)
    shipment = s.shipment(c, "delivered" if tracked else "in_transit", scan_days_ago=quiet)
    exc = s.exception(shipment, kind)
    if tracked:  # reported while in transit, before the delivery scan
        exc["opened_at"] = ts(datetime.fromisoformat(shipment["shipped_at"]) + timedelta(hours=12))
    t = s.ticket(c, "Where is my package?", "shipping", status="pending",
                 priority=high_for(c) if kind == "lost" else "normal", shipment=shipment)
    resolution = "delivered" if tracked else "withdrawn"
    hello, lookup = identify(s, c)
    return {
        "tags": ["exception", "resolve", "multi-write", "python-check"],
        "user": {"instruction": f"{who(c)} Your {rng.choice(ITEMS)} (ticket {t['id']}) that you reported "
                                f"{kind} has arrived{'' if tracked else ' (it was left with a neighbour)'}. "
                                "You want everything closed.",
                 "opening": "Good news, my package arrived after all. You can close my ticket.",
                 "script": [f"{hello} Ticket {t['id']}.", "Yes, close it all."]},
        "checks": [row("exception-resolved", "carrier_exceptions", {"id": exc["id"]},
                       {"status": "resolved", "resolution": resolution}),
                   row("ticket-resolved", "tickets", {"id": t["id"]}, {"status": "resolved"}),
                   python_check("not-resolved-over-exception",
                                "no_ticket_resolved_over_open_exception", ticket_id=t["id"]),
                   only(allow("carrier_exceptions", {"id": exc["id"]}),
                        allow("tickets", {"id": t["id"]}))],
        "gold": [lookup, call("get_ticket", ticket_id=t["id"]),
                 call("resolve_carrier_exception", exception_id=exc["id"], resolution=resolution),
                 call("resolve_ticket", ticket_id=t["id"], resolution="Package arrived.",
                      free=("resolution",))],
    }


def damaged_triage(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    shipment = s.shipment(c, "delivered", scan_days_ago=rng.randint(1, 5))
    t = s.ticket(c, rng.choice(("Item arrived broken", "Cracked on arrival")), "damaged",
                 status="new", shipment=shipment)
    hello, lookup = identify(s, c)
    item = rng.choice(ITEMS)
    return {
        "tags": ["exception", "priority", "multi-write"],
        "user": {"instruction": f"{who(c)} Your {item} (ticket {t['id']}) arrived damaged. You want the "
                                "damage reported to the carrier; no claim or credit yet.",
                 "opening": f"My {item} arrived damaged, can you report it?",
                 "script": [f"{hello} Ticket {t['id']}.", "Yes, report it.", "No, nothing else for now."]},
        "checks": [row("exception-opened", "carrier_exceptions", {"shipment_id": shipment["id"]},
                       {"kind": "damaged", "status": "open"}),
                   row("ticket-triaged", "tickets", {"id": t["id"]},
                       {"priority": high_for(c), "status": "pending"}),
                   only(allow("carrier_exceptions", {"shipment_id": shipment["id"]}),
                        allow("tickets", {"id": t["id"]}))],
        "gold": [lookup, call("get_ticket", ticket_id=t["id"]),
                 call("open_carrier_exception", shipment_id=shipment["id"], kind="damaged"),
                 call("set_priority", ticket_id=t["id"], priority=high_for(c)),
                 call("update_ticket_status", ticket_id=t["id"], status="pending")],
    }


TEMPLATES = {
    "resolve-blocked": resolve_blocked, "route-ticket": route_ticket, "delay-credit": delay_credit,
    "damage-claim": damage_claim, "report-lost": report_lost, "delivered-close": delivered_close,
    "damaged-triage": damaged_triage,
}


if __name__ == "__main__":
    taskgen.print_jsonl(taskgen.generate("support", TEMPLATES, PER_TEMPLATE, SEED, Scene, Ids()))
