"""Retail training candidates: 9 templates over sampled customers, orders and products.

    .venv/bin/python tasks/templates/retail.py > tasks/train/retail.jsonl

Deterministic (one random.Random(SEED), no clock): rerunning reproduces the committed file byte for
byte. Every task sets up its own rows in `init`, in the id range reserved for training (C8xxx,
PM8xxxx, P8xxx, W8xxxx, RT8xxxx); the held-out bench uses the 9xxx range and other names, so the two
suites share no entity and no instruction. Each template is one function that samples a situation
into a Scene and returns the task's user, checks and gold; the Scene's rows become its `init`.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # taskgen; runpy.run_path does not add it
import taskgen
from taskgen import allow, approx, call, only, python_check, row, said, say, ts, user

_seed = taskgen.domain_seed("retail")
CITIES, CATEGORIES = _seed.CITIES, _seed.CATEGORIES

SEED = 20260115
PER_TEMPLATE = 14
NOW = datetime(2026, 1, 15, 12, 0, 0)  # the retail domain's fixed clock

# First names the seed never uses, so a name and zip identify one customer.
FIRST = ("Adaeze", "Bruno", "Camila", "Dmitri", "Esme", "Fatima", "Gustavo", "Helga", "Ikaika",
         "Joaquin", "Kalani", "Leona", "Mirela", "Nikolai", "Orla", "Priyanka", "Rafael", "Saoirse",
         "Tobias", "Ulla", "Valentina", "Wiremu", "Ximena", "Yusra", "Zoltan", "Anouk", "Bjorn",
         "Cosima", "Desmond", "Eero")
LAST = ("Abernathy", "Baptiste", "Castellano", "Dragomir", "Eriksen", "Fontaine", "Gallagher",
        "Halvorsen", "Iwasaki", "Jankowski", "Kaur", "Lindgren", "Moreau", "Nakamura", "Oyelaran",
        "Petrov", "Quintero", "Rasmussen", "Sandoval", "Takahashi", "Underwood", "Valdivia",
        "Whitaker", "Yilmaz", "Zielinski")
STREETS = ("Aspen Way", "Birchwood Dr", "Chestnut St", "Dogwood Ln", "Evergreen Ter",
           "Foxglove Ct", "Goldenrod Ave", "Hawthorn Rd", "Ironwood Pl", "Juniper St",
           "Larkspur Ln", "Magnolia Ave")
MAIL_HOSTS = ("mailbox.example", "inbox.example", "post.example", "letters.example")
BRANDS = ("Alder", "Beacon", "Corvid", "Dune", "Ember", "Fjord", "Gale", "Harbor", "Iris",
          "Kestrel", "Loom", "Meridian", "Nimbus", "Orbit", "Prism", "Quill")
COLOURS = ("black", "white", "navy", "olive", "sand", "charcoal", "teal", "burgundy")
SIZES = tuple(f"size {s}" for s in ("7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12"))

CANCEL_WHY = {"no_longer_needed": "you no longer need it",
              "ordered_by_mistake": "you ordered it by mistake"}
CANCEL_SAYS = {  # how the user puts it
    "no_longer_needed": ("I don't need it anymore.", "My plans changed and I won't need it.",
                         "I found something else, so I no longer need it."),
    "ordered_by_mistake": ("I ordered it by mistake.", "I clicked buy by accident.",
                           "It was a mistake, I meant to order something else."),
}
RETURN_WHY = {"defective": "it is defective", "wrong_item": "you were sent the wrong item",
              "no_longer_needed": "you no longer need it"}
RETURN_SAYS = {
    "defective": ("it stopped working after two days", "it arrived broken", "it's defective"),
    "wrong_item": ("you sent me the wrong item", "it's not what I ordered"),
    "no_longer_needed": ("I don't need it anymore", "I changed my mind and don't need it"),
}


# -- the rows of one task -------------------------------------------------------------------------

class Ids:
    """Train-range ids, unique across the whole file."""

    def __init__(self):
        self.customers, self.methods, self.products = count(8001), count(80001), count(8001)
        self.orders, self.returns = count(80001), count(80001)

    def next(self, kind: str) -> str:
        prefix = {"customers": "C", "methods": "PM", "products": "P", "orders": "W",
                  "returns": "RT"}[kind]
        return f"{prefix}{next(getattr(self, kind))}"


class Scene(taskgen.Scene):
    """The rows of one retail task. Rows keep helper keys (a customer's `method`, an order's
    `lines`) that the task's init leaves out."""

    HELPER_KEYS = ("method", "lines")

    def address(self, city: tuple | None = None) -> tuple[str, str]:
        rng = self.rng
        name, state, zip3 = city or rng.choice(CITIES)
        zip_code = f"{zip3}{rng.randint(1, 99):02d}"
        street = f"{rng.randint(2, 9800)} {rng.choice(STREETS)}"
        return f"{street}, {name}, {state} {zip_code}", zip_code

    def customer(self) -> dict:
        rng = self.rng
        first, last = rng.choice(FIRST), rng.choice(LAST)
        cid = self.ids.next("customers")
        address, zip_code = self.address()
        row = self.add("customers", {
            "id": cid, "name": f"{first} {last}",
            "email": f"{first}.{last}.{cid[1:]}@{rng.choice(MAIL_HOSTS)}".lower(),
            "phone": f"555-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            "address": address, "zip": zip_code, "tier": rng.choice(("regular", "regular", "gold")),
            "created_at": ts(NOW - timedelta(days=rng.randint(60, 1500)))})
        kind = rng.choice(("card", "card", "paypal", "gift_card"))
        row["method"] = self.add("payment_methods", {
            "id": self.ids.next("methods"), "customer_id": cid, "kind": kind,
            "last4": f"{rng.randint(0, 9999):04d}" if kind == "card" else None,
            "balance": round(rng.uniform(5, 200), 2) if kind == "gift_card" else None})
        return row

    def product(self, category: str | None = None, model: tuple[str, str] | None = None,
                variant: str | None = None, price: float | None = None,
                stock: int | None = None) -> dict:
        """A product; without `model` (brand, base name) one new to this task, so that the user's
        words name a single product."""
        rng = self.rng
        category = category or rng.choice(sorted(CATEGORIES))
        taken = {p["name"].split(" (")[0] for p in self.init.get("products", [])}
        while model is None or (f"{model[0]} {model[1]}" in taken and variant is None):
            model = rng.choice(BRANDS), rng.choice(CATEGORIES[category])
        variant = variant or rng.choice(SIZES if category == "shoes" else COLOURS)
        return self.add("products", {
            "id": self.ids.next("products"), "category": category,
            "name": f"{model[0]} {model[1]} ({variant})",
            "price": price if price is not None else round(rng.uniform(12, 320), 2),
            "stock": stock if stock is not None else rng.randint(3, 60)})

    def some_lines(self, k: int | None = None) -> list[tuple[dict, int]]:
        k = k or self.rng.choice((1, 1, 2, 3))
        return [(self.product(), self.rng.choice((1, 1, 1, 2, 3))) for _ in range(k)]

    def order(self, customer: dict, status: str, lines: list[tuple[dict, int]]) -> dict:
        rng = self.rng
        if status == "delivered":  # within the 30-day return window
            delivered = NOW - timedelta(days=rng.randint(2, 26), hours=rng.randint(0, 10))
            placed, shipped = delivered - timedelta(days=5), delivered - timedelta(days=3)
        else:
            days = {"pending": (0, 1), "processing": (2, 3), "shipped": (4, 7)}[status]
            placed = NOW - timedelta(days=rng.randint(*days), hours=rng.randint(1, 10))
            shipped = placed + timedelta(days=2) if status == "shipped" else None
            delivered = None
        oid = self.ids.next("orders")
        row = self.add("orders", {
            "id": oid, "customer_id": customer["id"], "status": status, "placed_at": ts(placed),
            "shipped_at": shipped and ts(shipped), "delivered_at": delivered and ts(delivered),
            "shipping_address": customer["address"], "payment_method_id": customer["method"]["id"],
            "total": round(sum(p["price"] * q for p, q in lines), 2), "cancel_reason": None,
            "updated_at": ts(placed)})
        row["lines"] = [self.add("order_items", {
            "order_id": oid, "line": n, "product_id": p["id"], "quantity": q,
            "unit_price": p["price"], "status": "ordered"}) for n, (p, q) in enumerate(lines, 1)]
        return row

    def returned(self, status: str) -> tuple[dict, dict, dict, dict]:
        """A customer with a delivered order, one line of which is being returned."""
        rng, c = self.rng, self.customer()
        order = self.order(c, "delivered", self.some_lines(rng.choice((1, 2))))
        item = rng.choice(order["lines"])
        item["status"] = "returned" if status == "received" else "return_requested"
        requested = datetime.fromisoformat(order["delivered_at"]) + timedelta(days=1)
        received = min(requested + timedelta(days=4), NOW) if status == "received" else None
        ret = self.add("returns", {
            "id": self.ids.next("returns"), "order_id": order["id"], "line": item["line"],
            "quantity": rng.randint(1, item["quantity"]), "reason": rng.choice(sorted(RETURN_SAYS)),
            "status": status, "requested_at": ts(requested),
            "received_at": received and ts(received)})
        return c, order, item, ret


# -- task parts -----------------------------------------------------------------------------------

def identify(s: Scene, c: dict) -> tuple[str, dict]:
    """What the user says to be identified, and the gold lookup for it (email, or name and zip)."""
    if s.rng.random() < 0.7:
        return f"My email is {c['email']}.", call("find_customer", email=c["email"])
    return (f"I'm {c['name']}, zip code {c['zip']}.",
            call("find_customer", name=c["name"], zip=c["zip"]))


def who(c: dict, email: bool = True) -> str:
    contact = f"email {c['email']}, " if email else ""
    return f"You are {c['name']} ({contact}zip {c['zip']})."


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
                    "where": {"order_id": oid}, "expect": 1},
                   only(allow("escalations", {"order_id": oid}))],
        "gold": [lookup, call("get_order", order_id=oid),
                 say(f"Return {rid} has not been received yet, so I can't refund it. I'll "
                     "transfer you to a colleague."),
                 call("transfer_to_human", customer_id=c["id"], order_id=oid,
                      summary=f"Customer wants a refund for return {rid} before it is received.")],
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
                   said("told-shipped", "shipped")],
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
    rng, c = s.rng, s.customer()
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
