"""Retail training candidates: 9 templates over sampled customers, orders and products.

    .venv/bin/python tasks/templates/retail.py > tasks/train/retail.jsonl

Deterministic (one random.Random(SEED), no clock): rerunning reproduces the committed file byte for
byte. Every task sets up its own rows in `init`, in the id range reserved for training (C8xxx,
PM8xxxx, P8xxx, W8xxxx, RT8xxxx); the held-out bench uses the 9xxx range and other names, so the two
suites share no entity and no instruction. Each template is one function that samples a situation
into a Scene (retail_entities.py) and returns the task's user, checks and gold; the Scene's rows
become its `init`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# taskgen and retail_entities are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskgen
from retail_entities import (
    BRANDS,
    CANCEL_SAYS,
    CANCEL_WHY,
    CATEGORIES,
    CITIES,
    COLOURS,
    MAIL_HOSTS,
    RETURN_SAYS,
    RETURN_WHY,
    SIZES,
    Ids,
    Scene,
    identify,
    who,
)
from taskgen import allow, approx, call, judge, only, python_check, row, said, say, user

SEED = 20260115
PER_TEMPLATE = 14


# -- templates ------------------------------------------------------------------------------------

def cancel_order(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    order = s.order(c, rng.choice(("pending", "processing")), s.some_lines())
    oid = order["id"]
    if rng.random() < 0.5:
        s.order(c, "delivered", s.some_lines(1))  # another order, which must stay as it is
    reason = rng.choice(sorted(CANCEL_WHY))
    hello, lookup = identify(s, c)
    return {
        "tags": ["cancel", "single-write"],
        "user": user(f"{who(c)} You want to cancel order {oid} because {CANCEL_WHY[reason]}. "
                     "Confirm when asked.",
                     rng.choice(("I'd like to cancel an order.", f"Please cancel my order {oid}.",
                                 "Can you cancel something I ordered?")),
                     [f"{hello} The order is {oid}.", rng.choice(CANCEL_SAYS[reason]),
                      "Yes, please cancel it."]),
        "checks": [row("cancelled", "orders", {"id": oid},
                       {"status": "cancelled", "cancel_reason": reason}),
                   {"id": "refunded", "kind": "count", "table": "refunds", "expect": 1,
                    "where": {"order_id": oid, "amount": approx(order["total"])}},
                   only(allow("orders", {"id": oid}),
                        allow("refunds", {"order_id": oid}))],
        "gold": [lookup, call("get_order", order_id=oid),
                 call("cancel_order", order_id=oid, reason=reason)],
    }


def update_address(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    oid = s.order(c, "pending", s.some_lines())["id"]
    other = s.order(c, "pending", s.some_lines(1))["id"] if rng.random() < 0.5 else None
    home = next(x for x in CITIES if c["address"].endswith(f"{x[1]} {c['zip']}"))
    new_address, _ = s.address(home if rng.random() < 0.6 else None)
    hello, lookup = identify(s, c)
    keep = f" Your other pending order {other} stays where it is; say so if asked." if other else ""
    script = [f"{hello} Order {oid}.", f"Please ship it to {new_address}.", "Yes, that's right."]
    return {
        "tags": ["address", "single-write"] + (["unrequested-change"] if other else []),
        "user": user(f"{who(c)} Pending order {oid} should ship to {new_address}.{keep}",
                     rng.choice(("I need to change a delivery address.",
                                 "I moved, can you update where my order goes?",
                                 "Could you send my order somewhere else?")),
                     script + ([f"No, leave {other} as it is."] if other else [])),
        "checks": [row("new-address", "orders", {"id": oid},
                       {"shipping_address": new_address, "status": "pending"}),
                   only(allow("orders", {"id": oid}), ignore=["orders.updated_at"])],
        "gold": [lookup, call("get_order", order_id=oid),
                 call("update_shipping_address", order_id=oid, address=new_address)],
    }


def return_item(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    lines = s.some_lines(rng.choice((1, 2, 3)))
    oid = s.order(c, "delivered", lines)["id"]
    n = rng.randint(1, len(lines))
    product, bought = lines[n - 1]
    quantity = rng.randint(1, bought)
    reason = rng.choice(sorted(RETURN_SAYS))
    why = rng.choice(RETURN_SAYS[reason])
    name = product["name"]
    if bought == 1:
        want, answer = f"the {name}", "Just the one"
    elif quantity == bought:
        want, answer = f"all {bought} units of the {name}", f"All {bought} of them"
    else:
        want = f"{quantity} of the {bought} units of the {name}"
        answer = f"{quantity} of the {bought}"
    hello, lookup = identify(s, c)
    return {
        "tags": ["return", "single-write"],
        "user": user(f"{who(c)} From delivered order {oid} you want to return {want}, "
                     f"because {RETURN_WHY[reason]}.",
                     rng.choice(("I want to return something.", "Hi, how do I send an item back?",
                                 f"I need to return part of order {oid}.")),
                     [f"{hello} Order {oid}, the {name}.", f"{answer}: {why}.", "Yes, go ahead."]),
        "checks": [row("return-opened", "returns", {"order_id": oid, "line": n},
                       {"quantity": quantity, "reason": reason, "status": "requested"}),
                   row("line-marked", "order_items", {"order_id": oid, "line": n},
                       {"status": "return_requested"}),
                   only(allow("returns", {"order_id": oid}),
                        allow("order_items", {"order_id": oid, "line": n}))],
        "gold": [lookup, call("get_order", order_id=oid),
                 call("request_return", order_id=oid, line=n, quantity=quantity, reason=reason)],
    }


def refund_received_return(s: Scene) -> dict:
    c, order, item, ret = s.returned("received")
    oid, rid = order["id"], ret["id"]
    amount = round(item["unit_price"] * ret["quantity"], 2)
    hello, lookup = identify(s, c)
    return {
        "tags": ["refund", "python-check", "said"],
        "user": user(f"{who(c)} Your return {rid} (order {oid}) reached the warehouse. You want "
                     "the refund and want to know how much it is.",
                     s.rng.choice(("My return arrived at your warehouse, can I get my money back?",
                                   "Hi, I'm waiting on a refund for a return.")),
                     [f"{hello} Return {rid} on order {oid}.", "Yes, please refund it.",
                      "How much is it?"]),
        "checks": [python_check("refund-right", "refund_matches_return", return_id=rid),
                   said("told-amount", amount),
                   only(allow("refunds", {"return_id": rid}))],
        "gold": [lookup, call("get_order", order_id=oid), call("issue_refund", return_id=rid),
                 say(f"Return {rid} is refunded: ${amount:,.2f} goes back to the original "
                     "payment method.")],
    }


def exchange_item(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    category = rng.choice(sorted(CATEGORIES))
    model = rng.choice(BRANDS), rng.choice(CATEGORIES[category])
    mine, wanted, sold_out = rng.sample(SIZES if category == "shoes" else COLOURS, 3)
    price, quantity = round(rng.uniform(15, 300), 2), rng.choice((1, 1, 2))
    owned = s.product(category, model, mine, price)
    target = s.product(category, model, wanted, price, rng.randint(quantity, 20))
    s.product(category, model, sold_out, price, 0)  # a third variant, not the one the user picks
    lines = [(owned, quantity)] + (s.some_lines(1) if rng.random() < 0.5 else [])
    oid = s.order(c, "delivered", lines)["id"]
    kind = "size" if category == "shoes" else "colour"
    hello, lookup = identify(s, c)
    return {
        "tags": ["exchange", "user-supplies-info"],
        "user": user(f"{who(c)} In delivered order {oid} you want to exchange the {owned['name']} "
                     f"for the {wanted} version of the same model.",
                     rng.choice((f"Can I swap something I bought for a different {kind}?",
                                 f"I'd like to exchange an item for another {kind}.")),
                     [f"{hello} Order {oid}, the {model[0]} {model[1]}.",
                      f"The {wanted} one, please.", "Yes, exchange it."]),
        "checks": [row("line-exchanged", "order_items", {"order_id": oid, "line": 1},
                       {"product_id": target["id"], "status": "exchanged"}),
                   row("stock-taken", "products", {"id": target["id"]},
                       {"stock": target["stock"] - quantity}),
                   only(allow("order_items", {"order_id": oid}),
                        allow("products", {"id": target["id"]}))],
        "gold": [lookup, call("get_order", order_id=oid),
                 call("search_products", query=f"{model[0]} {model[1]}", category=category),
                 call("exchange_item", order_id=oid, line=1, new_product_id=target["id"])],
    }


def email_change(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    first, last = c["name"].lower().split()
    new_email = rng.choice((f"{first}.{last}@{rng.choice(MAIL_HOSTS)}",
                            f"{first[0]}{last}{rng.randint(1, 99)}@newmail.example",
                            f"{last}.{first}@work.example"))
    by_name = rng.random() < 0.5
    if by_name:
        lookup = call("find_customer", name=c["name"], zip=c["zip"])
        hello = f"{c['name']}, zip {c['zip']}. I can't get into my old email."
        lost = " You lost access to your old email and don't remember it exactly."
    else:
        lookup = call("find_customer", email=c["email"])
        hello, lost = f"My current email is {c['email']}.", ""
    return {
        "tags": ["account", "single-write", "identify" if by_name else "email"],
        "user": user(f"{who(c, email=not by_name)}{lost} Your new email is {new_email}.",
                     rng.choice(("I need to update my email address.",
                                 "Can you change the email on my account?")),
                     [hello, f"The new one is {new_email}.", "Yes, please."]),
        "checks": [row("email-set", "customers", {"id": c["id"]}, {"email": new_email}),
                   only(allow("customers", {"id": c["id"]}))],
        "gold": [lookup, call("update_customer_email", customer_id=c["id"], email=new_email)],
    }


def refund_not_received(s: Scene) -> dict:
    c, order, _, ret = s.returned("requested")
    oid, rid = order["id"], ret["id"]
    hello, lookup = identify(s, c)
    return {
        "tags": ["refund", "policy-trap", "escalate", "python-check"],
        "user": user(f"{who(c)} You shipped return {rid} (order {oid}) back and want the refund "
                     "right now. If refused, insist and ask for a human.",
                     s.rng.choice(("I sent my item back, please refund me now.",
                                   "Where is my refund? I returned the item already.")),
                     [f"{hello} Return {rid}, order {oid}.",
                      "I don't care, I want my money. Get me a person.", "Okay, thanks."]),
        "checks": [python_check("no-refund-before-receipt", "refunds_only_received_returns",
                                order_id=oid),
                   {"id": "escalated", "kind": "count", "table": "escalations",
                    "where": {"order_id": oid, "customer_id": {"any_of": [c["id"], None]}},
                    "expect": 1},
                   only(allow("escalations", {"order_id": oid}))],
        "gold": [lookup, call("get_order", order_id=oid),
                 say(f"Return {rid} has not been received yet, so I can't refund it. I'll "
                     "transfer you to a colleague."),
                 call("transfer_to_human", customer_id=c["id"], order_id=oid,
                      summary=f"Customer wants a refund for return {rid} before it is received.",
                      free=("summary",))],
    }


def cancel_shipped(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    oid = s.order(c, "shipped", s.some_lines())["id"]
    hello, lookup = identify(s, c)
    return {
        "tags": ["cancel", "refuse", "said", "policy-trap"],
        "user": user(f"{who(c)} You want to cancel order {oid}. If told it has shipped, "
                     "accept that.",
                     rng.choice((f"Please cancel order {oid}.",
                                 "I want to cancel my latest order.")),
                     [f"{hello} It's {oid}.", "Oh. Alright, thanks."]),
        "checks": [row("still-shipped", "orders", {"id": oid}, {"status": "shipped"}),
                   only(check_id="no-changes"),
                   said("told-shipped", "shipped"),
                   judge("offered-return", f"Did the agent explain that order {oid} cannot be "
                                           "cancelled because it has shipped, and tell the user "
                                           "it can be returned once it is delivered?")],
        "gold": [lookup, call("get_order", order_id=oid),
                 say(f"Order {oid} has already shipped, so it can't be cancelled; you can "
                     "return it after delivery.")],
    }


def cancel_and_move(s: Scene) -> dict:
    rng, c = s.rng, s.customer()
    cancel = s.order(c, rng.choice(("pending", "processing")), s.some_lines())["id"]
    move = s.order(c, "pending", s.some_lines())["id"]
    new_address, _ = s.address()
    reason = rng.choice(sorted(CANCEL_WHY))
    hello, lookup = identify(s, c)
    return {
        "tags": ["multi-step", "cancel", "address", "gold-state"],
        "user": user(f"{who(c)} Two requests, one at a time: cancel order {cancel} "
                     f"({CANCEL_WHY[reason]}), then ship pending order {move} to {new_address}.",
                     "Hi, I have two changes to my orders.",
                     [f"{hello} First, cancel {cancel}. {rng.choice(CANCEL_SAYS[reason])}", "Yes.",
                      f"Second, {move} should go to {new_address}.", "Yes, thanks."]),
        "checks": [{"id": "matches-gold", "kind": "gold_state"},
                   row("cancelled", "orders", {"id": cancel},
                       {"status": "cancelled", "cancel_reason": reason}),
                   row("moved", "orders", {"id": move}, {"shipping_address": new_address})],
        "gold": [lookup, call("get_order", order_id=cancel),
                 call("cancel_order", order_id=cancel, reason=reason),
                 call("update_shipping_address", order_id=move, address=new_address)],
    }


def quick_cancel(s: Scene) -> dict:
    """Everything in the first message, one call to make: the easiest rung of the ladder (a small
    model solves it sometimes, which is what GRPO needs to learn from)."""
    rng, c = s.rng, s.customer()
    order = s.order(c, rng.choice(("pending", "processing")), s.some_lines())
    oid = order["id"]
    reason = rng.choice(sorted(CANCEL_WHY))
    return {
        "tags": ["cancel", "single-call"],
        "user": user(f"{who(c)} You want order {oid} cancelled because {CANCEL_WHY[reason]}.",
                     f"Please cancel order {oid}. {rng.choice(CANCEL_SAYS[reason])} Yes, go ahead.",
                     ["Yes, please cancel it."]),
        "checks": [row("cancelled", "orders", {"id": oid},
                       {"status": "cancelled", "cancel_reason": reason}),
                   only(allow("orders", {"id": oid}),
                        allow("refunds", {"order_id": oid}))],
        "gold": [call("cancel_order", order_id=oid, reason=reason)],
    }


def quick_address(s: Scene) -> dict:
    """Everything in the first message, one call: copy the order id and the new address."""
    c = s.customer()
    oid = s.order(c, "pending", s.some_lines())["id"]
    new_address, _ = s.address(None)
    return {
        "tags": ["address", "single-call"],
        "user": user(f"{who(c)} Pending order {oid} should ship to {new_address}.",
                     f"Please ship order {oid} to {new_address} instead.", ["Yes, that's right."]),
        "checks": [row("new-address", "orders", {"id": oid}, {"shipping_address": new_address}),
                   only(allow("orders", {"id": oid}), ignore=["orders.updated_at"])],
        "gold": [call("update_shipping_address", order_id=oid, address=new_address)],
    }


TEMPLATES = {
    "cancel-order": cancel_order, "update-address": update_address, "return-item": return_item,
    "refund-received-return": refund_received_return, "exchange-item": exchange_item,
    "email-change": email_change, "refund-not-received": refund_not_received,
    "cancel-shipped": cancel_shipped, "cancel-and-move": cancel_and_move,
    # last: adding a template must not reshuffle the others
    "quick-cancel": quick_cancel, "quick-address": quick_address,
}


if __name__ == "__main__":
    taskgen.print_jsonl(taskgen.generate("retail", TEMPLATES, PER_TEMPLATE, SEED, Scene, Ids()))
