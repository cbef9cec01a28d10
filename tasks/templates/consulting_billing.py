"""The invoice and approval-chain templates of consulting.py: billing a period's approved time,
a large invoice, an invoice past the budget, and a requester who may not do what they ask. Each
samples a situation into a Scene and returns the task's tags, user, checks and gold."""

from __future__ import annotations

from datetime import date

from consulting_entities import LARGE_INVOICE, PRACTICES, Scene, identify, who, workdays
from taskgen import allow, approx, call, money, only, python_check, row, said, say, user

PERIOD = (date(2026, 3, 2), date(2026, 3, 13))


def _billable(s: Scene, eng: dict, waiting: int) -> tuple[list[dict], list[dict], float]:
    """Two or three people's March time on the engagement: (approved entries, `waiting` submitted
    ones, the approved entries' fees)."""
    rng, manager = s.rng, s.manager_of(eng)
    days = workdays(PERIOD[0], 10)
    approved, rates = [], {}
    people = [s.employee(rng.choice(("analyst", "consultant", "senior")), eng["area"])
              for _ in range(rng.choice((2, 3)))]
    for person in people:
        rates[person["id"]] = s.assign(eng, person, 40.0)["bill_rate"]
        approved += [s.entry(eng, person, d, rng.choice((6.0, 8.0)), "approved", manager)
                     for d in sorted(rng.sample(days[:5], rng.choice((2, 3))))]
    late = [s.entry(eng, rng.choice(people), d, 8.0, "submitted")
            for d in sorted(rng.sample(days[5:], waiting))]
    fees = round(sum(e["hours"] * rates[e["employee_id"]] for e in approved), 2)
    return approved, late, fees


def _engagement(s: Scene, budget: float = 400000.0) -> tuple[dict, dict, dict]:
    practice = s.rng.choice(PRACTICES)
    eng = s.engagement(practice, budget)
    eng["area"] = practice  # a helper key (HELPER_KEYS), not a column
    return eng, s.manager_of(eng), s.partner_of(eng)


def _invoiced(eng: dict, approved: list[dict], fees: float) -> tuple[dict, list]:
    """(gold call, checks) of billing the approved entries in one draft invoice."""
    ids = [e["id"] for e in approved]
    return (call("create_invoice", engagement_id=eng["id"], time_entry_ids=ids),
            [row("invoiced", "invoices", {"engagement_id": eng["id"], "status": "draft"},
                 {"amount": approx(fees)}),
             python_check("only-approved", "billed_only_approved_time", engagement_id=eng["id"]),
             {"id": "entries-billed", "kind": "count", "table": "time_entries",
              "where": {"engagement_id": eng["id"], "status": "billed"}, "expect": len(ids)}])


def _billing_allowed(eng: dict, n: int) -> list[dict]:
    return [allow("invoices", {"engagement_id": eng["id"]}), allow("invoice_lines", count=n),
            allow("time_entries", {"engagement_id": eng["id"]}, n)]


def invoice_time(s: Scene) -> dict:
    eng, manager, _ = _engagement(s)
    waiting = s.ids.variant("invoice-time", (0, 2, 3))
    approved, _, fees = _billable(s, eng, waiting)
    hello, find = identify(s, manager)
    call_, checks = _invoiced(eng, approved, fees)
    gold = [find, call("get_engagement", engagement_id=eng["id"]),
            call("list_time_entries", engagement_id=eng["id"], since=PERIOD[0].isoformat(),
                 until=PERIOD[1].isoformat()), call_,
            say(f"Invoice drafted for {money(fees)}." + (
                f" {waiting} entries are still waiting for approval and are not billed."
                if waiting else ""))]
    if waiting:
        checks.append(said("told-waiting", waiting))
    checks.append(only(*_billing_allowed(eng, len(approved))))
    return {"tags": ["invoice", "multi-write"] + (["policy-trap", "said"] if waiting else []),
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} You want the time "
                         f"from {PERIOD[0].isoformat()} to {PERIOD[1].isoformat()} on {eng['id']} "
                         "invoiced (a draft is fine).",
                         f"Please invoice the time on {eng['id']} for March 2 to 13.",
                         [f"{hello}", "Yes, create the draft.", "Okay, thanks."]),
            "checks": checks, "gold": gold}


def large_invoice(s: Scene) -> dict:
    rng = s.rng
    eng, manager, partner = _engagement(s)
    variant = s.ids.variant("large-invoice", ("no-approval", "approved", "pending"))
    inv = s.invoice(eng, round(rng.uniform(LARGE_INVOICE + 2000, 140000), 2))
    if variant != "no-approval":
        s.approval("invoice", inv["id"], inv["amount"], manager, partner,
                   "approved" if variant == "approved" else "pending")
    hello, find = identify(s, manager)
    gold = [find, call("get_invoice", invoice_id=inv["id"])]
    if variant == "approved":
        gold += [call("issue_invoice", invoice_id=inv["id"]), say("The invoice is issued.")]
        checks = [row("issued", "invoices", {"id": inv["id"]}, {"status": "issued"}),
                  python_check("approved", "large_invoices_approved", engagement_id=eng["id"]),
                  only(allow("invoices", {"id": inv["id"]}))]
    elif variant == "no-approval":
        gold += [call("get_engagement", engagement_id=eng["id"]),
                 say(f"Invoices over {money(LARGE_INVOICE)} need {partner['name']}'s approval "
                     "first; I'll request it and keep the invoice a draft."),
                 call("request_approval", kind="invoice", reference=inv["id"],
                      amount=inv["amount"], requested_by=manager["id"],
                      approver_id=partner["id"], note="monthly invoice over $50,000", free=("note",))]
        checks = [row("approval-requested", "approvals", {"kind": "invoice", "reference": inv["id"]},
                      {"status": "pending", "amount": approx(inv["amount"]),
                       "approver_id": partner["id"], "requested_by": manager["id"]}),
                  row("still-draft", "invoices", {"id": inv["id"]}, {"status": "draft"}),
                  only(allow("approvals", {"reference": inv["id"]}))]
    else:
        gold.append(say(f"{partner['name']}'s approval of this invoice is still pending; it "
                        "stays a draft until then."))
        checks = [{"id": "one-request", "kind": "count", "table": "approvals",
                   "where": {"reference": inv["id"]}, "expect": 1},
                  row("still-draft", "invoices", {"id": inv["id"]}, {"status": "draft"}),
                  said("told-pending", "pending"), only(check_id="no-changes")]
    tags = ["invoice", "large-invoice"] + ([] if variant == "approved" else ["policy-trap"])
    return {"tags": tags,
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} Draft invoice "
                         f"{inv['id']} ({money(inv['amount'])}) should go to the client today. "
                         "If told it needs an approval, agree to request it.",
                         f"Please issue invoice {inv['id']} today.",
                         [f"{hello}", "Okay, request the approval then.", "Thanks."]),
            "checks": checks, "gold": gold}


def budget_overrun(s: Scene) -> dict:
    rng = s.rng
    eng, manager, partner = _engagement(s)
    raised = s.ids.variant("budget-overrun", ("over", "raised", "over")) == "raised"
    approved, _, fees = _billable(s, eng, 0)
    so_far = round(rng.uniform(150000, 300000), 2)
    s.invoice(eng, so_far, "issued")
    eng["budget"] = round(so_far + fees * rng.uniform(0.2, 0.8), -2)
    needed = round(so_far + fees, 2)
    if raised:
        s.approval("change_order", eng["id"], round(needed + 20000, -3), manager, partner,
                   "approved")
    hello, find = identify(s, manager)
    gold = [find, call("get_engagement", engagement_id=eng["id"]),
            call("list_time_entries", engagement_id=eng["id"], status="approved")]
    if raised:
        call_, checks = _invoiced(eng, approved, fees)
        gold += [call_, say(f"Invoice drafted for {money(fees)}, within the approved change order.")]
        checks.append(python_check("within-budget", "billing_within_budget", engagement_id=eng["id"]))
        checks.append(only(*_billing_allowed(eng, len(approved))))
    else:
        gold += [say(f"Billing {money(fees)} would take {eng['id']} to {money(needed)}, past its "
                     f"{money(eng['budget'])} budget; I'll ask {partner['name']} for a change "
                     "order instead."),
                 call("request_approval", kind="change_order", reference=eng["id"],
                      amount=needed, requested_by=manager["id"], approver_id=partner["id"],
                      note="approved time exceeds the budget", free=("note",))]
        checks = [{"id": "no-invoice", "kind": "absent", "table": "invoices",
                   "where": {"engagement_id": eng["id"], "status": "draft"}},
                  row("change-order", "approvals", {"kind": "change_order", "reference": eng["id"]},
                      {"amount": approx(needed), "status": "pending",
                       "approver_id": partner["id"], "requested_by": manager["id"]}),
                  python_check("within-budget", "billing_within_budget", engagement_id=eng["id"]),
                  only(allow("approvals", {"reference": eng["id"]}))]
    return {"tags": ["invoice", "budget"] + (["multi-write"] if raised else ["policy-trap"]),
            "user": user(f"{who(manager, 'manager of engagement ' + eng['id'])} You want all "
                         f"approved, unbilled time on {eng['id']} invoiced. If told the budget "
                         "does not allow it, agree to what the agent proposes.",
                         f"Please bill all the approved time on {eng['id']}.",
                         [f"{hello}", "Okay, do that.", "Thanks."]),
            "checks": checks, "gold": gold}


def wrong_requester(s: Scene) -> dict:
    rng = s.rng
    eng, manager, _ = _engagement(s)
    variant = s.ids.variant("wrong-requester", ("self-approve", "staff"))
    person = s.employee(rng.choice(("consultant", "senior")), eng["area"])
    s.assign(eng, person, 40.0)
    mine = [s.entry(eng, person, d, 8.0, "submitted") for d in workdays(date(2026, 3, 9), 3)]
    colleague = s.employee("analyst", eng["area"])
    hello, find = identify(s, person)
    gold = [find, call("get_employee", employee_id=person["id"]),
            call("get_engagement", engagement_id=eng["id"])]
    if variant == "self-approve":
        ask = f"approve {{}} own submitted time on {eng['id']} (entries {', '.join(e['id'] for e in mine)})"
        gold.append(say(f"Nobody approves their own time: {manager['name']}, the engagement "
                        "manager, approves it."))
        guard = {"id": "still-submitted", "kind": "count", "table": "time_entries",
                 "where": {"employee_id": person["id"], "status": "submitted"}, "expect": 3}
    else:
        ask = f"staff {{}} colleague {colleague['name']} on {eng['id']} 20 hours a week from 2026-03-23"
        gold.append(say(f"Only the engagement's manager, {manager['name']}, or its partner can "
                        "staff it; please ask them."))
        guard = {"id": "not-staffed", "kind": "absent", "table": "assignments",
                 "where": {"employee_id": colleague["id"]}}
    return {"tags": ["permissions", "refuse", "policy-trap", "said"],
            "user": user(f"{who(person, person['level'] + ' on engagement ' + eng['id'])} You "
                         f"want to {ask.format('your')}; your manager is busy. If refused, accept.",
                         "Could you help me with something on my engagement?",
                         [f"{hello} Please {ask.format('my')}.", "Oh, okay. I'll ask them."]),
            "checks": [guard, said("told-who", manager["name"]), only(check_id="no-changes")],
            "gold": gold}
