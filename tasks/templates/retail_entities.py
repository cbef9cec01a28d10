"""The entities the retail templates (retail.py) sample into a task's Scene: customers with a
payment method, products, orders and returns in the reserved train id range, the words users give
for a cancellation or a return, and how the user identifies themselves.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import count

import taskgen
from taskgen import call, ts

_seed = taskgen.domain_seed("retail")
CITIES, CATEGORIES = _seed.CITIES, _seed.CATEGORIES

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
