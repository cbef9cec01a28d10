"""Training-candidate tasks for the bank domain, generated from templates over sampled entities
(bank_entities.py).

    .venv/bin/python tasks/templates/bank.py > tasks/train/bank.jsonl

The output is deterministic (fixed rng seed, no timestamps) and must match the committed file byte
for byte. Each task sets up its own customer in the reserved train range (C8xxx, A8xxxx, K8xxxx,
T8xxxxxx, D8xxxx), disjoint from the bench range (9xxxx) and from the seed. Templates:

- freeze-card      misplaced card: freeze the right one of several cards
- replace-card     lost / stolen / damaged card: replace it, limit carried over
- card-limit       raise or lower within the KYC cap, or file a request above it (trap)
- transfer         between own accounts, within or over the daily transfer limit (trap)
- dispute          fraud (freeze first, credit), other reasons (credit only from $100), older than
                   60 days (refuse) or over $2,500 (escalate)
- travel-notice    up to 90 days, or a longer trip shortened by the customer (trap)

and the app's features (bank_app.py):

- quick-freeze     everything in the first message: freeze one card (one call)
- quick-pot        everything in the first message: move money into one pot (one call)
- instant-transfer to a payee within the KYC daily instant limit, or the most it allows (trap), or
                   to a new payee, at most $250.00 in its first 24 hours (trap)
- pots             open and fund one, withdraw, close, or refuse while it is locked (trap)
- virtual-card     within the KYC cap, at the cap when more is asked (trap), or none past 3 (trap)
"""

import random
import sys
from datetime import timedelta
from pathlib import Path

# taskgen and bank_entities are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bank_app
import taskgen
from bank_entities import (
    COUNTRIES,
    EVERYDAY,
    TODAY,
    Charge,
    Ids,
    account,
    card,
    disputed_charge,
    identify,
    last4s,
    person,
    purchase,
)
from taskgen import allow, call, judge, money, python_check, row, said, say, task

SEED = 20260115
PER_TEMPLATE = 20
KYC_CAPS = {1: 1000.0, 2: 3000.0, 3: 10000.0}


# -- task pieces --------------------------------------------------------------------------------

def only(*allowed: dict) -> dict:
    return taskgen.only(*allowed, check_id="no-side-effects")  # the bank tasks' name for it


# -- templates ----------------------------------------------------------------------------------

def freeze_card(rng: random.Random, ids: Ids, n: int) -> dict:
    c = person(rng, ids, rng.choice((1, 2, 3)))
    aid = ids.account(1)
    digits = last4s(rng, rng.randint(1, 3))
    cards = [card(ids.card(k), c["id"], aid, d, KYC_CAPS[c["kyc_level"]] / 2)
             for k, d in enumerate(digits, 1)]
    target = rng.choice(cards)
    where = rng.choice(("at the gym", "in a taxi", "somewhere in the office",
                        "at a friend's place"))
    intro, who, find = identify(rng, c)
    user = {"instruction": f"{intro} You left your debit card ending {target['last4']} {where} and "
                           "hope to get it back, so you only want it frozen, not cancelled.",
            "opening": f"I think I left my card {where}. Can you put a hold on it?",
            "script": [f"{who}. The card ending {target['last4']}.",
                       "Just freeze it, I'll probably get it back. Yes, please."]}
    gold = [find, call("get_customer", customer_id=c["id"]),
            call("freeze_card", card_id=target["id"]),
            say(f"Your card ending {target['last4']} is frozen.")]
    checks = [row("frozen", "cards", {"id": target["id"]}, {"status": "frozen"}),
              only(allow("cards", {"id": target["id"]})),
              judge("told-which-card", f"Did the agent tell the user that the card ending "
                                       f"{target['last4']} is now frozen (not cancelled)?")]
    init = {"customers": [c], "accounts": [account(aid, c["id"], "checking", 1500.0, 2500.0)],
            "cards": cards}
    return task("bank", "freeze-card", n, ["card", "freeze", "single-write"], user, init, checks,
                gold)


def replace_card(rng: random.Random, ids: Ids, n: int) -> dict:
    c = person(rng, ids, rng.choice((1, 2, 3)))
    aid = ids.account(1)
    limit = rng.choice([x for x in (500.0, 1000.0, 2000.0, 3000.0, 5000.0)
                        if x <= KYC_CAPS[c["kyc_level"]]])
    digit, = last4s(rng, 1)
    old = card(ids.card(1), c["id"], aid, digit, limit)
    reason, story = rng.choice((("lost", "lost it on a hike and it is gone for good"),
                                ("stolen", "had it stolen from your bag on the train"),
                                ("damaged", "snapped it in half by accident")))
    intro, who, find = identify(rng, c)
    user = {"instruction": f"{intro} You {story}: your debit card ending "
                           f"{digit}. You want a replacement card.",
            "opening": "I need a new debit card, mine is unusable.",
            "script": [f"{who}. It's the one ending {digit}; I {story}.", "Yes, replace it."]}
    gold = [find, call("get_customer", customer_id=c["id"]),
            call("replace_card", card_id=old["id"], reason=reason),
            say(f"Your card ending {digit} is cancelled; the replacement keeps your "
                f"{money(limit)} daily limit.")]
    checks = [row("old-cancelled", "cards", {"id": old["id"]},
                  {"status": "cancelled", "cancel_reason": reason}),
              row("replacement", "cards", {"replaces": old["id"]},
                  {"status": "active", "spending_limit": limit}),
              only(allow("cards", {"id": old["id"]}), allow("cards", {"replaces": old["id"]}))]
    init = {"customers": [c], "accounts": [account(aid, c["id"], "checking", 2100.0, 2500.0)],
            "cards": [old]}
    return task("bank", "replace-card", n, ["card", "replace", "single-write"], user, init, checks,
                gold)


def card_limit(rng: random.Random, ids: Ids, n: int) -> dict:
    kyc = rng.choice((1, 2, 3))
    cap = KYC_CAPS[kyc]
    c = person(rng, ids, kyc)
    aid = ids.account(1)
    current = rng.choice((250.0, 500.0)) if kyc == 1 else rng.choice((500.0, 1000.0, 2000.0))
    above = n % 2 == 0
    wanted = (cap + rng.choice((500.0, 1000.0, 2500.0, 5000.0)) if above
              else rng.choice([x for x in (300.0, 750.0, 1000.0, 1500.0, 2500.0, 3000.0, 6000.0)
                               if x <= cap and x != current]))
    purpose = rng.choice(("a new laptop", "wedding expenses", "moving costs", "a dental bill"))
    digit, = last4s(rng, 1)
    k = card(ids.card(1), c["id"], aid, digit, current)
    intro, who, find = identify(rng, c)
    user = {"instruction": f"{intro} You want the daily spending limit on your "
                           f"card ending {digit} set to {money(wanted)} for {purpose}. If told it "
                           "needs a review, ask for the request to be filed.",
            "opening": f"Could you change my card's daily limit to {money(wanted)}?",
            "script": [f"{who}, card ending {digit}.",
                       f"Okay, file the request then. It's for {purpose}." if above
                       else "Yes, please."]}
    gold = [find, call("get_customer", customer_id=c["id"])]
    if above:
        gold += [say(f"Your verification level allows at most {money(cap)}; {money(wanted)} "
                     "needs a review. Shall I file a request?"),
                 call("request_limit_increase", card_id=k["id"], requested_limit=wanted,
                      reason=purpose, free=("reason",)),
                 say("The request is filed; the credit team reviews it within 2-3 days.")]
        checks = [row("limit-unchanged", "cards", {"id": k["id"]}, {"spending_limit": current}),
                  row("request-filed", "limit_requests", {"card_id": k["id"]},
                      {"requested_limit": wanted, "status": "pending"}),
                  only(allow("limit_requests", {"card_id": k["id"]}))]
        tags = ["limit", "policy-trap", "request"]
    else:
        gold += [call("change_card_limit", card_id=k["id"], new_limit=wanted),
                 say(f"Your daily limit is now {money(wanted)}.")]
        checks = [row("limit-set", "cards", {"id": k["id"]}, {"spending_limit": wanted}),
                  python_check("within-kyc-cap", "limit_within_kyc_cap", card_id=k["id"]),
                  only(allow("cards", {"id": k["id"]}))]
        tags = ["limit", "single-write"]
    init = {"customers": [c], "accounts": [account(aid, c["id"], "checking", 4200.0, 2500.0)],
            "cards": [k]}
    return task("bank", "card-limit", n, tags, user, init, checks, gold)


def transfer(rng: random.Random, ids: Ids, n: int) -> dict:
    c = person(rng, ids, rng.choice((1, 2, 3)))
    limit = rng.choice((1000.0, 2000.0, 2500.0, 5000.0))
    checking, savings = ids.account(1), ids.account(2)
    accounts = [account(checking, c["id"], "checking", round(rng.uniform(1000, 8000) + limit, 2),
                        limit),
                account(savings, c["id"], "savings", round(rng.uniform(6000, 30000) + limit, 2),
                        limit)]
    src, dst = rng.choice(((checking, savings), (savings, checking)))
    names = {checking: "checking", savings: "savings"}
    sent = rng.choice((0.0, round(limit * rng.choice((0.3, 0.5, 0.8)), 2)))
    remaining = round(limit - sent, 2)
    over = n % 2 == 1
    wanted = (round(remaining + rng.choice((100.0, 250.0, 600.0)), 2) if over
              else round(remaining * rng.choice((0.2, 0.5, 1.0)), 2))
    earlier = [{"id": f"TR8{ids.n:03d}1", "from_account_id": src, "to_account_id": dst,
                "amount": sent, "memo": None, "created_at": "2026-01-15T07:45:00"}]
    amount = remaining if over else wanted
    intro, who, find = identify(rng, c)
    today = f" You already moved {money(sent)} the same way this morning." if sent else ""
    user = {"instruction": f"{intro} You want {money(wanted)} moved from your {names[src]} to your "
                           f"{names[dst]} account.{today} If told that is over a limit, accept the "
                           "largest amount allowed today.",
            "opening": f"Please move {money(wanted)} from {names[src]} to {names[dst]}.",
            "script": [who, "Then send the most you can today. Yes." if over else "Yes, go ahead."]}
    gold = [find, call("get_customer", customer_id=c["id"]), call("get_account", account_id=src)]
    if over:
        already = f" and {money(sent)} already went out today" if sent else ""
        gold.append(say(f"The daily transfer limit is {money(limit)}{already}, so I can "
                        f"send at most {money(remaining)} today. Okay?"))
    gold += [call("transfer_funds", from_account_id=src, to_account_id=dst, amount=amount),
             say(f"Done: {money(amount)} moved to {names[dst]}.")]
    checks = [python_check("within-daily-limit", "transfers_within_daily_limit", account_id=src),
              row("transferred", "transfers",
                  {"from_account_id": src, "created_at": "2026-01-15T12:00:00"},
                  {"to_account_id": dst, "amount": amount})]
    if over:
        checks.append(said("told-remaining", remaining))
    checks.append(only(allow("transfers", {"from_account_id": src}),
                       allow("accounts", {"customer_id": c["id"]}, 2)))
    init = {"customers": [c], "accounts": accounts}
    if sent:
        init["transfers"] = earlier
    tags = ["transfer", "amount"] + (["policy-trap", "said"] if over else ["single-write"])
    return task("bank", "transfer", n, tags, user, init, checks, gold)


DISPUTE_OUTCOMES = ("fraud", "credit", "no-credit", "too-old", "escalate")


def dispute_user(rng: random.Random, c: dict, ch: Charge, digit: str) -> tuple[dict, dict]:
    """The user who disputes the charge, and the gold find_customer call for them."""
    story = {"fraud": f"you never made it and have never heard of {ch.merchant}; your card ending "
                      f"{digit} is still in your wallet",
             "not_received": f"you paid for an order that never arrived and {ch.merchant} stopped "
                             "replying",
             "wrong_amount": f"you agreed to pay {money(ch.agreed or 0)} but were charged more",
             }[ch.reason]
    intro, who, find = identify(rng, c)
    user = {"instruction": f"{intro} {ch.merchant} charged you {money(ch.charged)} on "
                           f"{ch.day.isoformat()}; {story}. You want it disputed. Accept whatever "
                           "the agent says policy allows.",
            "opening": f"I want to dispute a charge from {ch.merchant}.",
            "script": [f"{who}. The {money(ch.charged)} charge from {ch.day.isoformat()}.",
                       "Yes, go ahead.", "Okay, thank you."]}
    return user, find


def dispute(rng: random.Random, ids: Ids, n: int) -> dict:
    outcome = DISPUTE_OUTCOMES[n % len(DISPUTE_OUTCOMES)]
    c = person(rng, ids, rng.choice((2, 3)))
    aid, kid = ids.account(1), ids.card(1)
    digit, = last4s(rng, 1)
    balance = round(rng.uniform(1500, 7000), 2)
    ch = disputed_charge(rng, outcome)
    txs = [purchase(ids.tx(1), aid, kid, rng.choice(EVERYDAY), 31.5, TODAY - timedelta(days=150)),
           purchase(ids.tx(2), aid, kid, ch.merchant, ch.charged, ch.day),
           purchase(ids.tx(3), aid, kid, rng.choice(EVERYDAY), round(rng.uniform(5, 80), 2),
                    TODAY - timedelta(days=rng.randint(2, 10)))]
    user, find = dispute_user(rng, c, ch, digit)
    lookup = [find, call("get_customer", customer_id=c["id"]),
              call("list_transactions", account_id=aid, merchant=ch.merchant.split()[0])]
    if outcome == "too-old":
        gold, checks, tags = dispute_refused(ch, ids.tx(2), lookup)
    elif outcome == "escalate":
        gold, checks, tags = dispute_escalated(ch, ids.tx(2), lookup, c["id"])
    else:
        gold, checks, tags = dispute_opened(ch, ids, lookup, aid, kid,
                                            credit=outcome in ("fraud", "credit"))
    init = {"customers": [c], "accounts": [account(aid, c["id"], "checking", balance, 2500.0)],
            "cards": [card(kid, c["id"], aid, digit, 2000.0)], "transactions": txs,
            "disputes": [{"id": ids.prior_dispute, "transaction_id": ids.tx(1), "account_id": aid,
                          "reason": "duplicate", "amount": 31.5, "status": "resolved_merchant",
                          "provisional_credit": 0.0, "card_status_at_open": "active", "note": None,
                          "opened_at": "2025-08-30T10:00:00"}]}
    return task("bank", "dispute", n, tags, user, init, checks, gold)


def no_dispute(target: str) -> dict:
    return {"id": "no-dispute", "kind": "absent", "table": "disputes",
            "where": {"transaction_id": target}}


def dispute_refused(ch: Charge, target: str, lookup: list) -> tuple[list, list, list]:
    """(gold, checks, tags) of a charge older than the 60-day window: no dispute, say why."""
    gold = lookup + [say(f"That charge is from {ch.day.isoformat()}, more than 60 days ago, "
                         "so it can no longer be disputed.")]
    checks = [no_dispute(target),
              said("told-window", {"any_of": ["60 days", "60-day", "sixty days"]}), only()]
    return gold, checks, ["dispute", "policy-trap", "refuse", "said"]


def dispute_escalated(ch: Charge, target: str, lookup: list,
                      customer_id: str) -> tuple[list, list, list]:
    """(gold, checks, tags) of a charge over $2,500: escalated, not opened."""
    gold = lookup + [say("Disputes over $2,500.00 go to our disputes team; I'll pass it on."),
                     call("escalate", summary=f"Dispute of {money(ch.charged)} {ch.merchant} "
                                              f"charge {target}; over the $2,500 threshold.",
                          customer_id=customer_id, reference=target, free=("summary",))]
    # the reference may be left out, but not name another transaction
    checks = [no_dispute(target), {"id": "escalated", "kind": "count", "table": "escalations",
                                   "where": {"customer_id": customer_id,
                                             "reference": {"any_of": [target, None]}},
                                   "expect": 1},
              only(allow("escalations", {"customer_id": customer_id}))]
    return gold, checks, ["dispute", "policy-trap", "escalate"]


def dispute_opened(ch: Charge, ids: Ids, lookup: list, aid: str, kid: str,
                   credit: bool) -> tuple[list, list, list]:
    """(gold, checks, tags) of a dispute that is opened: fraud freezes the card first, and a
    provisional credit follows for fraud or from $100.00."""
    target = ids.tx(2)
    args = {"transaction_id": target, "reason": ch.reason}
    if ch.agreed is not None:
        args["amount"] = ch.disputed
    gold = lookup + ([call("freeze_card", card_id=kid)] if ch.reason == "fraud" else [])
    gold.append(call("open_dispute", **args))
    if credit:
        gold.append(call("issue_provisional_credit", dispute_id=ids.next_dispute))
    gold.append(say(f"The dispute for {money(ch.disputed)} is open; " +
                    (f"{money(ch.disputed)} is credited provisionally." if credit else
                     "it is under $100.00, so no provisional credit.")))
    checks = [row("dispute-opened", "disputes", {"transaction_id": target},
                  {"reason": ch.reason, "amount": ch.disputed, "status": "open"}),
              python_check("credit-per-policy", "provisional_credit_per_policy",
                           transaction_id=target)]
    allowed = [allow("disputes", {"transaction_id": target}), allow("transactions", {"id": target})]
    if ch.reason == "fraud":
        checks += [python_check("card-frozen-first", "fraud_card_frozen_first", transaction_id=target),
                   row("card-stays-frozen", "cards", {"id": kid}, {"status": "frozen"})]
        allowed.append(allow("cards", {"id": kid}))
    if credit:
        allowed += [allow("transactions", {"kind": "provisional_credit", "account_id": aid}),
                    allow("accounts", {"id": aid})]
    checks.append(only(*allowed))
    tags = ["dispute", ch.reason, "multi-write" if credit else "single-write"] + \
        ([] if credit else ["policy-trap"])
    return gold, checks, tags


def destination_named(kid: str, place: str) -> dict:
    """The card's travel notice names `place`, in whatever words and case."""
    return {"id": "notice-destination", "kind": "sql", "expect": 1,
            "query": "SELECT count(*) FROM travel_notices WHERE card_id = ? AND lower(destination) LIKE ?",
            "params": [kid, f"%{place.lower()}%"]}


def travel_notice(rng: random.Random, ids: Ids, n: int) -> dict:
    c = person(rng, ids, rng.choice((1, 2, 3)))
    aid, kid = ids.account(1), ids.card(1)
    digit, = last4s(rng, 1)
    country = rng.choice(COUNTRIES)
    start = TODAY + timedelta(days=rng.randint(3, 45))
    too_long = n % 2 == 0
    end = start + timedelta(days=rng.randint(95, 160) if too_long else rng.randint(4, 85))
    agreed = start + timedelta(days=rng.randint(30, 90)) if too_long else end
    intro, who, find = identify(rng, c)
    later = (f" If told the notice is limited, ask to cover {start.isoformat()} to "
             f"{agreed.isoformat()} instead." if too_long else "")
    user = {"instruction": f"{intro} You will be in {country} from "
                           f"{start.isoformat()} to {end.isoformat()} and want a travel notice on "
                           f"your card ending {digit}.{later}",
            "opening": f"I'm going to {country} from {start.isoformat()} to {end.isoformat()}. "
                       "Please add a travel notice.",
            "script": [f"{who}, card ending {digit}.",
                       f"Then cover {start.isoformat()} to {agreed.isoformat()}. Yes." if too_long
                       else "Yes, please."]}
    gold = [find, call("get_customer", customer_id=c["id"])]
    if too_long:
        gold.append(say("Travel notices can cover at most 90 days. Which dates should I "
                        "cover?"))
    gold += [call("add_travel_notice", card_id=kid, destination=country,
                  start_date=start.isoformat(), end_date=agreed.isoformat()),
             say(f"Your notice covers {start.isoformat()} to {agreed.isoformat()}.")]
    checks = [row("notice", "travel_notices", {"card_id": kid},
                  {"start_date": start.isoformat(), "end_date": agreed.isoformat()}),
              destination_named(kid, country),
              only(allow("travel_notices", {"card_id": kid}))]
    init = {"customers": [c], "accounts": [account(aid, c["id"], "checking", 2600.0, 2500.0)],
            "cards": [card(kid, c["id"], aid, digit, 1000.0)]}
    tags = ["travel"] + (["policy-trap", "user-info"] if too_long else ["single-write"])
    return task("bank", "travel-notice", n, tags, user, init, checks, gold)


# last: adding templates must not reshuffle the others (bank_app.py: the app's features)
TEMPLATES = (freeze_card, replace_card, card_limit, transfer, dispute, travel_notice,
             *bank_app.TEMPLATES)


def generate() -> list[dict]:
    rng = random.Random(SEED)
    tasks, number = [], 0
    for template in TEMPLATES:
        for n in range(1, PER_TEMPLATE + 1):
            number += 1
            tasks.append(template(rng, Ids(number), n))
    return tasks


if __name__ == "__main__":
    taskgen.print_jsonl(generate())
