"""Training candidates for the consulting domain: 9 templates over sampled employees, clients,
engagements, assignments, time entries and invoices (consulting_entities.py; the invoice
templates are in consulting_billing.py).

    .venv/bin/python tasks/templates/consulting.py > consulting_train.jsonl

consulting is an out-of-distribution domain: its benchmark (tasks/ood/consulting.jsonl, split
`ood`) measures transfer, so no training pool holds its tasks and these candidates are not
committed under tasks/train. They are here for the opposite experiment and the in-domain ceiling;
tests/test_domain_consulting.py pins the output byte for byte and proves every task sound.

Deterministic (one random.Random(SEED), no clock). Every task sets up its own rows in `init`, in the
train id range (E8xxx, K8xxx, EN8xxx, AS8xxxx, TE8xxxxx, IN8xxxx, AP8xxxx); the benchmark uses 9xxx.
Templates, easiest first:

- quick-issue-invoice everything in the first message: issue one draft invoice (one call)
- quick-approve-time  everything in the first message: approve one time entry (one call)
- log-time            a consultant logs their own days; or an engagement they are not on (trap)
- approve-week        a manager approves the week's submitted time, but not their own (trap)
- staff-consultant    at the card rate within free capacity; only the hours still free (trap); a
                      discount filed for the partner, staffed at the card rate meanwhile (trap)
- invoice-time        bill the approved time of a period, never the waiting entries (trap)
- large-invoice       over $50,000: issued with the partner's approval, else a request (trap), or
                      no second request while one is pending (trap)
- budget-overrun      an invoice past the budget becomes a change-order request (trap), or is
                      billed under an approved change order
- wrong-requester     a consultant cannot approve their own time or staff a colleague (trap)
"""

from __future__ import annotations

import sys
from datetime import date, timedelta
from pathlib import Path

# taskgen and the consulting modules are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskgen
from consulting_billing import budget_overrun, invoice_time, large_invoice, wrong_requester
from consulting_entities import PRACTICES, TASKS, Ids, Scene, identify, who, workdays
from taskgen import allow, call, money, only, python_check, row, said, say, user

SEED = 20260316
PER_TEMPLATE = 12
LAST_WEEK = date(2026, 3, 9)


# -- the easy tier ------------------------------------------------------------------------------

def quick_issue_invoice(s: Scene) -> dict:
    """Everything in the first message, one call: copy the invoice id."""
    rng = s.rng
    eng = s.engagement(rng.choice(PRACTICES))
    manager = s.manager_of(eng)
    inv = s.invoice(eng, round(rng.uniform(6000, 48000), 2))
    return {"tags": ["invoice", "issue", "single-call"],
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} Draft invoice "
                         f"{inv['id']} ({money(inv['amount'])}) is ready to go to the client.",
                         f"Please issue invoice {inv['id']}; it's ready. Yes, go ahead.",
                         ["Yes, issue it."]),
            "checks": [row("issued", "invoices", {"id": inv["id"]}, {"status": "issued"}),
                       only(allow("invoices", {"id": inv["id"]}))],
            "gold": [call("issue_invoice", invoice_id=inv["id"])]}


def quick_approve_time(s: Scene) -> dict:
    """Everything in the first message, one call: copy the entry and the approver's id."""
    rng = s.rng
    practice = rng.choice(PRACTICES)
    eng = s.engagement(practice)
    manager = s.manager_of(eng)
    person = s.employee(rng.choice(("analyst", "consultant", "senior")), practice)
    s.assign(eng, person, 40.0)
    day = rng.choice(workdays(LAST_WEEK, 5))
    entry = s.entry(eng, person, day, rng.choice((6.0, 7.5, 8.0)), "submitted")
    return {"tags": ["time", "approve", "single-call"],
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} You want "
                         f"{person['name']}'s time entry {entry['id']} approved.",
                         f"I'm {manager['id']}, the manager of {eng['id']}. Please approve time "
                         f"entry {entry['id']} ({person['name']}, {day.isoformat()}). Yes, go ahead.",
                         ["Yes, approve it."]),
            "checks": [row("approved", "time_entries", {"id": entry["id"]},
                           {"status": "approved", "approved_by": manager["id"]}),
                       only(allow("time_entries", {"id": entry["id"]}))],
            "gold": [call("approve_time", time_entry_ids=[entry["id"]], approver_id=manager["id"])]}


# -- time ----------------------------------------------------------------------------------------

def log_time(s: Scene) -> dict:
    rng = s.rng
    practice = rng.choice(PRACTICES)
    eng, other = s.engagement(practice), s.engagement(practice)
    person = s.employee(rng.choice(("analyst", "consultant", "senior")), practice)
    s.assign(eng, person, 40.0)
    variant = s.ids.variant("log-time", ("one-day", "two-days", "not-assigned"))
    target = other if variant == "not-assigned" else eng
    days = sorted(rng.sample(workdays(LAST_WEEK, 5), 2 if variant == "two-days" else 1))
    hours, what = rng.choice((4.0, 6.0, 7.5, 8.0)), rng.choice(TASKS)
    hello, find = identify(s, person)
    when = " and ".join(d.isoformat() for d in days)
    gold = [find, call("get_employee", employee_id=person["id"])]
    if variant == "not-assigned":
        gold.append(say(f"You're not assigned to {other['id']}, so I can't log time on it; your "
                        f"assignment is on {eng['id']}."))
        checks = [{"id": "nothing-logged", "kind": "absent", "table": "time_entries",
                   "where": {"employee_id": person["id"], "engagement_id": other["id"]}},
                  said("told-not-assigned", {"any_of": ["not assigned", "not staffed",
                                                        "no assignment"]}),
                  only(check_id="no-changes")]
        tags = ["time", "log", "policy-trap", "said"]
    else:
        gold += [call("log_time", employee_id=person["id"], engagement_id=eng["id"],
                      work_date=d.isoformat(), hours=hours, description=what, free=("description",))
                 for d in days]
        gold.append(say(f"Logged {hours:g} hours on {eng['id']} for {when}."))
        checks = [row(f"logged-{d.isoformat()}", "time_entries",
                      {"employee_id": person["id"], "engagement_id": eng["id"],
                       "work_date": d.isoformat()}, {"hours": hours, "status": "submitted"})
                  for d in days]
        checks.append(only(allow("time_entries", {"employee_id": person["id"]}, len(days))))
        tags = ["time", "log"] + (["multi-write"] if len(days) > 1 else ["single-write"])
    return {"tags": tags,
            "user": user(f"{who(person, person['level'])} You worked {hours:g} hours on "
                         f"{target['id']} ({what}) on {when} and want it logged.",
                         f"Can you log my hours on {target['id']}?",
                         [f"{hello} {hours:g} hours on {when}, {what}.", "Yes, please.",
                          "Thanks."]),
            "checks": checks, "gold": gold}


def approve_week(s: Scene) -> dict:
    rng = s.rng
    practice = rng.choice(PRACTICES)
    eng = s.engagement(practice)
    manager, partner = s.manager_of(eng), s.partner_of(eng)
    own = s.ids.variant("approve-week", ("team", "with-own")) == "with-own"
    team = [s.employee(rng.choice(("analyst", "consultant", "senior")), practice)
            for _ in range(rng.choice((2, 3)))]
    days = workdays(LAST_WEEK, 5)
    entries = []
    for person in team:
        s.assign(eng, person, 40.0)
        entries += [s.entry(eng, person, d, 8.0, "submitted") for d in rng.sample(days, 2)]
    s.entry(eng, team[0], LAST_WEEK - timedelta(days=7), 8.0, "approved", manager)
    if own:
        s.assign(eng, manager, 8.0)
        for d in rng.sample(days, 2):
            s.entry(eng, manager, d, 4.0, "submitted")
    hello, find = identify(s, manager)
    ids = sorted(e["id"] for e in entries)
    gold = [find, call("get_engagement", engagement_id=eng["id"]),
            call("list_time_entries", engagement_id=eng["id"], status="submitted"),
            call("approve_time", time_entry_ids=ids, approver_id=manager["id"]),
            say(f"Approved {len(ids)} entries." + (f" Your own entries need the partner, "
                                                  f"{partner['name']}, to approve them." if own
                                                  else ""))]
    checks = [{"id": "team-approved", "kind": "count", "table": "time_entries",
               "where": {"engagement_id": eng["id"], "status": "approved",
                         "approved_by": manager["id"]}, "expect": len(ids) + 1},
              python_check("approval-chain", "time_approved_per_chain", engagement_id=eng["id"])]
    if own:
        checks.append(said("told-partner", partner["name"]))
    checks.append(only(allow("time_entries", {"engagement_id": eng["id"]}, len(ids))))
    return {"tags": ["time", "approve", "multi-write"] + (["policy-trap", "said"] if own else []),
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} You want all "
                         f"submitted time on {eng['id']} approved" + (", your own included." if own
                                                                      else "."),
                         f"Please approve everything submitted on {eng['id']}.",
                         [f"{hello}", "Yes, approve them all.", "Okay, thanks."]),
            "checks": checks, "gold": gold}


# -- staffing ------------------------------------------------------------------------------------

def _booked_elsewhere(s: Scene, person: dict, variant: str, wanted: float, start: date,
                      end: date) -> float:
    """Book the person on another engagement over the dates: all but 8-12 hours of their
    capacity (partial), now and then just enough to leave `wanted` free (fits). Returns the hours
    a week they have free for the new assignment."""
    capacity = person["weekly_capacity"]
    busy = 0.0 if variant != "partial" else capacity - s.rng.choice((8.0, 12.0))
    if variant == "fits" and s.rng.random() < 0.5:
        busy = capacity - wanted - s.rng.choice((0.0, 8.0))
    if busy > 0:
        s.assign(s.engagement(person["practice"]), person, busy, start - timedelta(weeks=4),
                 end + timedelta(weeks=2))
    return capacity - max(busy, 0.0)


def staff_consultant(s: Scene) -> dict:
    rng = s.rng
    eng = s.engagement(rng.choice(PRACTICES))
    manager, partner = s.manager_of(eng), s.partner_of(eng)
    variant = s.ids.variant("staff-consultant", ("fits", "partial", "discount"))
    level = rng.choice(("analyst", "consultant", "senior"))
    person = s.employee(level, manager["practice"], rng.choice((40.0, 40.0, 32.0)))
    start = date(2026, 3, 23) + timedelta(weeks=rng.randint(0, 2))
    end = start + timedelta(weeks=rng.randint(6, 10), days=-3)
    wanted = float(rng.choice((16, 20, 24)))
    free = _booked_elsewhere(s, person, variant, wanted, start, end)
    hours = wanted if variant != "partial" else free
    card = eng["client"]["rates"][level]
    asked = card - rng.choice((20.0, 35.0, 50.0)) if variant == "discount" else card
    hello, find = identify(s, manager)
    span = f"{start.isoformat()} to {end.isoformat()}"
    gold = [find, call("get_engagement", engagement_id=eng["id"]),
            call("find_employee", name=person["name"]),
            call("get_availability", employee_id=person["id"], start_date=start.isoformat(),
                 end_date=end.isoformat())]
    checks, allowed = [], [allow("assignments", {"engagement_id": eng["id"]})]
    if variant == "partial":
        gold.append(say(f"{person['name']} has only {hours:g} hours a week free then. Staff "
                        f"{hours:g}?"))
    if variant == "discount":
        gold += [say(f"The card rate for a {level} is {money(card)}; {money(asked)} needs "
                     f"{partner['name']}'s approval. I'll file it and staff at the card rate."),
                 call("request_approval", kind="rate_exception", reference=eng["id"],
                      amount=asked, requested_by=manager["id"], approver_id=partner["id"],
                      note=f"discount for {person['name']}", employee_id=person["id"], free=("note",))]
        checks.append(row("exception-filed", "approvals",
                          {"kind": "rate_exception", "reference": eng["id"],
                           "employee_id": person["id"]},
                          {"amount": asked, "status": "pending", "approver_id": partner["id"],
                           "requested_by": manager["id"]}))
        allowed.append(allow("approvals", {"reference": eng["id"]}))
    gold += [call("assign_consultant", engagement_id=eng["id"], employee_id=person["id"],
                  hours_per_week=hours, start_date=start.isoformat(), end_date=end.isoformat(),
                  bill_rate=card),
             say(f"{person['name']} is staffed {hours:g} h/week from {span} at {money(card)}.")]
    checks = [row("staffed", "assignments", {"engagement_id": eng["id"],
                                             "employee_id": person["id"]},
                  {"hours_per_week": hours, "start_date": start.isoformat(),
                   "end_date": end.isoformat(), "bill_rate": card}),
              python_check("within-policy", "assignment_within_policy", engagement_id=eng["id"],
                           employee_id=person["id"])] + checks + [only(*allowed)]
    accept = {"fits": "Yes, go ahead.",
              "partial": f"Then {hours:g} hours a week, yes.",
              "discount": "Fine, file the discount and staff at the card rate for now."}[variant]
    rate = f" at {money(asked)} an hour (a discount we promised)" if variant == "discount" else ""
    return {"tags": ["staffing"] + {"fits": ["single-write"],
                                    "partial": ["capacity", "policy-trap"],
                                    "discount": ["rate-card", "policy-trap", "multi-write"]}[variant],
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} You want "
                         f"{person['name']} ({level}) staffed on {eng['id']} {wanted:g} hours a "
                         f"week from {span}{rate}. Accept what the agent says policy allows.",
                         f"I need {person['name']} on {eng['id']}, please.",
                         [f"{hello} {wanted:g} hours a week from {span}{rate}.", accept,
                          "Thanks."]),
            "checks": checks, "gold": gold}


TEMPLATES = {
    "quick-issue-invoice": quick_issue_invoice, "quick-approve-time": quick_approve_time,
    "log-time": log_time, "approve-week": approve_week, "staff-consultant": staff_consultant,
    "invoice-time": invoice_time, "large-invoice": large_invoice,
    "budget-overrun": budget_overrun, "wrong-requester": wrong_requester,
}


if __name__ == "__main__":
    taskgen.print_jsonl(taskgen.generate("consulting", TEMPLATES, PER_TEMPLATE, SEED, Scene, Ids()))
