"""The bank templates of the app's features (bank.py appends them to its own): a one-call freeze
and a one-call pot top-up (the easy tier), instant transfers within the KYC and new-payee limits,
savings pots and their locks, and virtual cards within the count and the KYC cap."""

from __future__ import annotations

import random
from datetime import timedelta

from bank_entities import TODAY, Ids, account, card, identify, last4s, person
from taskgen import allow, call, money, only, python_check, row, said, say, task

KYC_CAPS = {1: 1000.0, 2: 3000.0, 3: 10000.0}
INSTANT_CAPS = {1: 500.0, 2: 2500.0, 3: 10000.0}
NEW_PAYEE_CAP = 250.0
FRIENDS = ("Maya Lindqvist", "Tomas Ferreira", "Ines Haddad", "Oskar Brandt", "Leila Moradi",
           "Jonas Kerr", "Ruth Abara", "Pedro Saldana")
BANKS = ("Chase", "Monzo", "Revolut", "Chime", "Ally")
POT_NAMES = ("Holiday", "Rainy day", "New laptop", "Wedding", "Car repairs", "Taxes", "Gifts")


def payee_id(ids: Ids, k: int) -> str:
    return f"PE8{ids.n:03d}{k}"


def pot_id(ids: Ids, k: int) -> str:
    return f"PT8{ids.n:03d}{k}"


def payee(ids: Ids, k: int, cid: str, name: str, added: str) -> dict:
    return {"id": payee_id(ids, k), "customer_id": cid, "name": name,
            "account_number": f"{4000000000 + ids.n * 10 + k}", "bank": BANKS[(ids.n + k) % 5],
            "created_at": added}


def pot(ids: Ids, k: int, aid: str, name: str, balance: float, locked: str | None = None) -> dict:
    return {"id": pot_id(ids, k), "account_id": aid, "name": name, "balance": balance,
            "goal": 2000.0, "locked_until": locked, "status": "open",
            "created_at": "2025-06-01T10:00:00"}


def base(rng: random.Random, ids: Ids, kyc: int | None = None) -> tuple[dict, dict]:
    """A customer of KYC level `kyc` (or any) and their checking account."""
    c = person(rng, ids, kyc or rng.choice((1, 2, 3)))
    return c, account(ids.account(1), c["id"], "checking", round(rng.uniform(2500, 9000), 2),
                      2500.0)


# -- the easy tier ------------------------------------------------------------------------------

def quick_freeze(rng: random.Random, ids: Ids, n: int) -> dict:
    """Everything in the first message, one call: copy the card id."""
    c, a = base(rng, ids)
    cards = [card(ids.card(k), c["id"], a["id"], d, 1000.0) for k, d in
             enumerate(last4s(rng, rng.choice((1, 2))), 1)]
    target = rng.choice(cards)
    if n % 2:
        target["form"] = "virtual"
    user = {"instruction": f"You are {c['name']} ({c['email']}). You want card {target['id']} "
                           "frozen right away; you may have left it somewhere.",
            "opening": f"Please freeze my card {target['id']} right now, I can't find it. Yes, "
                       "go ahead.",
            "script": ["Yes, freeze it."]}
    return task("bank", "quick-freeze", n, ["card", "freeze", "single-call"], user,
                {"customers": [c], "accounts": [a], "cards": cards},
                [row("frozen", "cards", {"id": target["id"]}, {"status": "frozen"}),
                 only(allow("cards", {"id": target["id"]}), check_id="no-side-effects")],
                [call("freeze_card", card_id=target["id"])])


def quick_pot(rng: random.Random, ids: Ids, n: int) -> dict:
    """Everything in the first message, one call: copy the pot id and the amount."""
    c, a = base(rng, ids)
    p = pot(ids, 1, a["id"], rng.choice(POT_NAMES), float(rng.randint(0, 20) * 50))
    amount = float(rng.choice((50, 100, 150, 200, 250, 400)))
    user = {"instruction": f"You are {c['name']} ({c['email']}). You want {money(amount)} set "
                           f"aside in your pot {p['id']} ({p['name']}).",
            "opening": f"Please move {money(amount)} into my pot {p['id']} ({p['name']}). Yes, "
                       "go ahead.",
            "script": ["Yes, move it."]}
    return task("bank", "quick-pot", n, ["pot", "single-call"], user,
                {"customers": [c], "accounts": [a], "pots": [p]},
                [row("pot-funded", "pots", {"id": p["id"]}, {"balance": p["balance"] + amount}),
                 row("account-debited", "accounts", {"id": a["id"]},
                     {"balance": round(a["balance"] - amount, 2)}),
                 only(allow("pots", {"id": p["id"]}), allow("accounts", {"id": a["id"]}),
                      allow("pot_movements", {"pot_id": p["id"]}), check_id="no-side-effects")],
                [call("move_to_pot", pot_id=p["id"], amount=amount)])


# -- instant transfers --------------------------------------------------------------------------

def instant_transfer(rng: random.Random, ids: Ids, n: int) -> dict:
    variant = ("within", "over-limit", "new-payee")[n % 3]
    kyc = rng.choice((1, 2)) if variant == "over-limit" else rng.choice((1, 2, 3))
    c, a = base(rng, ids, kyc)
    cap = INSTANT_CAPS[kyc]
    friend, other = rng.sample(FRIENDS, 2)
    old = payee(ids, 1, c["id"], friend, "2025-03-10T09:00:00")
    init = {"customers": [c], "accounts": [a], "payees": [old]}
    sent = round(cap * rng.choice((0.4, 0.6, 0.8)), 2) if variant == "over-limit" else 0.0
    if sent:
        init["instant_transfers"] = [{"id": f"IT8{ids.n:03d}1", "account_id": a["id"],
                                      "payee_id": old["id"], "amount": sent,
                                      "reference": "earlier today",
                                      "created_at": "2026-01-15T08:10:00"}]
    intro, who, find = identify(rng, c)
    gold = [find, call("get_customer", customer_id=c["id"]), call("get_account", account_id=a["id"])]
    to, name = old["id"], friend
    if variant == "within":
        wanted = amount = round(rng.uniform(20, cap * 0.9), 2)
    elif variant == "over-limit":
        wanted, amount = round(cap - sent + rng.choice((100.0, 250.0)), 2), round(cap - sent, 2)
        gold.append(say(f"Your level {kyc} daily instant limit is {money(cap)} and "
                        f"{money(sent)} went out today, so you can send {money(amount)} more."))
    else:
        wanted, amount, name, to = float(rng.choice((400, 600, 900))), NEW_PAYEE_CAP, other, \
            payee_id(ids, 2)
        gold += [call("add_payee", customer_id=c["id"], name=other,
                      account_number=f"{5100000000 + ids.n}", bank="Chase"),
                 say(f"A new payee can receive at most {money(NEW_PAYEE_CAP)} in the first 24 "
                     "hours. Send that now?")]
    gold += [call("send_instant_transfer", from_account_id=a["id"], payee_id=to, amount=amount),
             say(f"Sent {money(amount)} to {name}.")]
    checks = [python_check("within-limits", "instant_transfers_within_limits", customer_id=c["id"]),
              row("sent", "instant_transfers", {"payee_id": to, "created_at": "2026-01-15T12:00:00"},
                  {"amount": amount})]
    if variant == "new-payee":  # the payee the money goes to is the one the customer described
        checks.append({"id": "payee-added", "kind": "sql", "expect": 1,
                       "query": "SELECT count(*) FROM payees WHERE id = ? AND name = ? AND "
                                "account_number = ? AND lower(bank) LIKE '%chase%'",
                       "params": [to, other, f"{5100000000 + ids.n}"]})
    if variant != "within":
        checks.append(said("told-limit", amount))
    allowed = [allow("instant_transfers", {"account_id": a["id"]}), allow("accounts", {"id": a["id"]})]
    if variant == "new-payee":
        allowed.append(allow("payees", {"customer_id": c["id"]}))
    checks.append(only(*allowed, check_id="no-side-effects"))
    details = (f" Their account number is {5100000000 + ids.n} at Chase; you have never paid them "
               "before." if variant == "new-payee" else "")
    user = {"instruction": f"{intro} You want to send {money(wanted)} to {name} by instant "
                           f"transfer.{details} If told that is over a limit, send the most "
                           "allowed now.",
            "opening": f"I need to send {money(wanted)} to {name} right away.",
            "script": [f"{who}." + (f" Account {5100000000 + ids.n} at Chase." if details else ""),
                       "Then send what's allowed. Yes." if variant != "within" else "Yes, send it.",
                       "Thanks."]}
    tags = ["instant-transfer"] + (["single-write"] if variant == "within" else
                                   ["policy-trap", "said"])
    return task("bank", "instant-transfer", n, tags, user, init, checks, gold)


# -- pots ---------------------------------------------------------------------------------------

def pots(rng: random.Random, ids: Ids, n: int) -> dict:
    variant = ("create", "withdraw", "locked", "close")[n % 4]
    c, a = base(rng, ids)
    name = rng.choice(POT_NAMES)
    until = TODAY + timedelta(days=rng.randint(20, 150))
    locked = until.isoformat()
    p = pot(ids, 1, a["id"], name, float(rng.randint(8, 40) * 50),
            locked if variant == "locked" else None)
    amount = float(rng.choice((100, 150, 200, 300)))
    intro, who, find = identify(rng, c)
    gold = [find, call("get_customer", customer_id=c["id"])]
    allowed = [allow("pots", {"account_id": a["id"]}), allow("accounts", {"id": a["id"]}),
               allow("pot_movements", {"pot_id": p["id"] if variant != "create" else pot_id(ids, 2)})]
    if variant == "create":
        new = rng.choice([x for x in POT_NAMES if x != name])
        ask = f"open a new pot called {new} and put {money(amount)} in it"
        gold += [call("create_pot", account_id=a["id"], name=new),
                 call("move_to_pot", pot_id=pot_id(ids, 2), amount=amount)]
        checks = [row("pot-opened", "pots", {"account_id": a["id"], "name": new},
                      {"balance": amount, "status": "open"})]
    elif variant == "withdraw":
        ask = f"take {money(amount)} out of your {name} pot"
        gold.append(call("withdraw_from_pot", pot_id=p["id"], amount=amount))
        checks = [row("withdrawn", "pots", {"id": p["id"]}, {"balance": p["balance"] - amount})]
    elif variant == "close":
        ask = f"close your {name} pot"
        gold.append(call("close_pot", pot_id=p["id"]))
        checks = [row("closed", "pots", {"id": p["id"]}, {"status": "closed", "balance": 0.0}),
                  row("returned", "accounts", {"id": a["id"]},
                      {"balance": round(a["balance"] + p["balance"], 2)})]
    else:
        ask = f"take {money(amount)} out of your {name} pot for an unexpected bill"
        gold.append(say(f"Your {name} pot is locked until {locked}, so no money can leave it "
                        "before then."))
        checks = [python_check("lock-kept", "pot_lock_respected", pot_id=p["id"]),
                  said("told-lock", {"any_of": [locked, f"{until:%B} {until.day}"]}),
                  only(check_id="no-side-effects")]
    if variant != "locked":
        gold.append(say("Done."))
        checks.append(only(*allowed, check_id="no-side-effects"))
    user = {"instruction": f"{intro} You want to {ask}." + (" If told it is not possible, accept."
                                                            if variant == "locked" else ""),
            "opening": "I'd like to do something with my savings pots.",
            "script": [f"{who}. I want to {ask.replace('your', 'my')}.", "Yes, please.",
                       "Okay, thanks."]}
    tags = ["pot"] + {"create": ["multi-write"], "withdraw": ["single-write"],
                      "close": ["single-write"], "locked": ["policy-trap", "said"]}[variant]
    return task("bank", "pots", n, tags, user,
                {"customers": [c], "accounts": [a], "pots": [p]}, checks, gold)


# -- virtual cards ------------------------------------------------------------------------------

def virtual_card(rng: random.Random, ids: Ids, n: int) -> dict:
    variant = ("create", "fourth", "over-cap")[n % 3]
    kyc = rng.choice((1, 2)) if variant == "over-cap" else rng.choice((1, 2, 3))
    c, a = base(rng, ids, kyc)
    cap = KYC_CAPS[kyc]
    held = 3 if variant == "fourth" else rng.choice((0, 1))
    cards = [card(ids.card(1), c["id"], a["id"], last4s(rng, 1)[0], cap / 2)]
    for k in range(2, held + 2):
        cards.append({**card(ids.card(k), c["id"], a["id"], last4s(rng, 1)[0], 200.0),
                      "form": "virtual"})
    wanted = cap + rng.choice((1000.0, 2000.0)) if variant == "over-cap" else \
        rng.choice([x for x in (250.0, 500.0, 1000.0) if x <= cap])
    limit = cap if variant == "over-cap" else wanted
    intro, who, find = identify(rng, c)
    gold = [find, call("get_customer", customer_id=c["id"])]
    if variant == "fourth":
        gold.append(say("You already have 3 virtual cards, the most allowed; cancel one first "
                        "if you need another."))
        checks = [{"id": "no-new-card", "kind": "count", "table": "cards",
                   "where": {"customer_id": c["id"]}, "expect": len(cards)},
                  said("told-three", {"any_of": ["3 virtual cards", "three virtual cards",
                                                 "3 active virtual cards", "at most 3"]}),
                  only(check_id="no-side-effects")]
    else:
        if variant == "over-cap":
            gold.append(say(f"Your verification level caps card limits at {money(cap)}. Create "
                            "it with that limit?"))
        gold += [call("create_virtual_card", account_id=a["id"], spending_limit=limit),
                 say(f"Your virtual card is ready in the app with a {money(limit)} limit.")]
        checks = [{"id": "created", "kind": "row", "table": "cards",
                   "where": {"customer_id": c["id"], "form": "virtual", "status": "active",
                             "spending_limit": limit}},
                  python_check("within-policy", "virtual_cards_within_policy", customer_id=c["id"]),
                  only(allow("cards", {"customer_id": c["id"], "form": "virtual"}),
                       check_id="no-side-effects")]
    user = {"instruction": f"{intro} You want a new virtual card for online shopping with a daily "
                           f"limit of {money(wanted)}. If told about a limit, accept what is "
                           "allowed.",
            "opening": "Can I get a virtual card for shopping online?",
            "script": [f"{who}. A {money(wanted)} daily limit, please.", "Okay, yes.", "Thanks."]}
    tags = ["card", "virtual-card"] + (["single-write"] if variant == "create" else
                                       ["policy-trap"] + (["said"] if variant == "fourth" else []))
    return task("bank", "virtual-card", n, tags, user,
                {"customers": [c], "accounts": [a], "cards": cards}, checks, gold)


TEMPLATES = (quick_freeze, quick_pot, instant_transfer, pots, virtual_card)
