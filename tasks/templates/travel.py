"""Travel training candidates: 8 templates over sampled travellers, hotels and bookings.

    .venv/bin/python tasks/templates/travel.py > tasks/train/travel.jsonl

Deterministic (one random.Random(SEED), no clock): rerunning reproduces the committed file byte for
byte. Every task sets up its own rows in `init`, in the id range reserved for training (E8xxx,
H8xxx, B8xxxxx, PY8xxxxx, AR8xxxx); the held-out bench uses the 9xxx range and other names, so the
two suites share no entity and no instruction. Rate caps and cities come from the domain's seed, so
a cap a task quotes is the cap the tools report. Each template is one function that samples a
situation into a Scene (travel_entities.py) and returns the user, init, checks and gold of one task.
"""

from __future__ import annotations

import sys
from datetime import date, datetime, timedelta
from pathlib import Path

# taskgen and travel_entities are imported from this folder, which runpy.run_path does not add
sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskgen
from taskgen import allow, approx, call, judge, only, python_check, row, said, say
from travel_entities import (
    CHECK_IN_HOUR,
    CITIES,
    NOW_HOUR,
    REASONS,
    TODAY,
    Ids,
    Scene,
    article,
    cap,
    day,
    money,
    spoken,
    who,
)

SEED = 20260302
PER_TEMPLATE = 15


# -- task pieces --------------------------------------------------------------------------------

def fee_now(check_in: date, window_hours: int, nightly_rate: float) -> float:
    midnight = datetime.combine(check_in, datetime.min.time())
    deadline = midnight + timedelta(hours=CHECK_IN_HOUR - window_hours)
    now = datetime.combine(TODAY, datetime.min.time()) + timedelta(hours=NOW_HOUR)
    return 0.0 if now < deadline else nightly_rate


def settled(b: dict) -> dict:
    return python_check("settled", "payments_settle", booking_id=b["id"])


def untouched(b: dict) -> dict:
    return row("booking-untouched", "bookings", {"id": b["id"]},
               {"status": "confirmed", "room_type": b["room_type"], "check_in": b["check_in"],
                "check_out": b["check_out"], "total": approx(b["total"])})


def nights_of(b: dict) -> int:
    return (date.fromisoformat(b["check_out"]) - date.fromisoformat(b["check_in"])).days


TOLD_APPROVAL = said("told-approval", {"any_of": ["approval", "approve"]})


# -- templates ----------------------------------------------------------------------------------

def book_within_cap(s: Scene) -> dict:
    rng = s.rng
    e, _ = s.traveller()
    city = rng.choice(CITIES)
    hotel = s.hotel(city, e["travel_tier"])
    room = rng.choice(("standard", "deluxe"))
    check_in, nights = s.stay()
    check_out = check_in + timedelta(days=nights)
    rate = hotel["rates"][room]
    booked = {"id": "booked", "kind": "sql",
              "query": "SELECT b.hotel_id, b.room_type, b.check_in, b.check_out, b.booked_by, "
                       "p.kind, p.amount FROM bookings b JOIN payments p ON p.booking_id = b.id "
                       "WHERE b.employee_id = ?", "params": [e["id"]],
              "expect": [[hotel["id"], room, day(check_in), day(check_out), e["id"], "charge",
                          rate * nights]]}
    return {
        "tags": ["book", "single-write"],
        "user": {"instruction": f"{who(e)} You need {article(room)} room at the {hotel['name']} "
                                f"from {day(check_in)} to {day(check_out)}. Confirm when asked.",
                 "opening": rng.choice((f"I need a hotel in {city}.",
                                        f"Could you book me a room in {city}?",
                                        f"Hi, I'm travelling to {city} and need somewhere to stay.")),
                 "script": [(f"My email is {e['email']}. The {hotel['name']}, {article(room)} room, "
                             f"{spoken(check_in)} to {spoken(check_out)}."), "Yes, book it."]},
        "checks": [booked, only(allow("bookings", {"employee_id": e["id"]}),
                                allow("payments", {"cost_center": e["cost_center"]}))],
        "gold": [call("find_employee", email=e["email"]),
                 call("get_rate_cap", employee_id=e["id"], city=city),
                 call("search_hotels", city=city, check_in=day(check_in), check_out=day(check_out)),
                 say(f"{article(room).capitalize()} room at {hotel['name']} is {money(rate)} a night, "
                     f"within your {money(cap(e['travel_tier'], city))} cap: "
                     f"{money(rate * nights)} in total. Book it?"),
                 call("create_booking", employee_id=e["id"], booked_by=e["id"], hotel_id=hotel["id"],
                      room_type=room, check_in=day(check_in), check_out=day(check_out))],
    }


def cancel_booking(s: Scene) -> dict:
    rng = s.rng
    e, _ = s.traveller()
    late = rng.random() < 0.5
    window = rng.choice((48, 72)) if late else rng.choice((24, 48, 72))
    hotel = s.hotel(rng.choice(CITIES), e["travel_tier"], window=window)
    # late: check-in today or tomorrow, past a 48 or 72 hour window; otherwise a week or more away
    if late:
        check_in, nights = TODAY + timedelta(days=rng.randint(0, 1)), rng.randint(2, 4)
    else:
        check_in, nights = s.stay(8)
    b = s.booking(e, hotel, rng.choice(("standard", "deluxe")), check_in, nights)
    fee = fee_now(check_in, window, b["nightly_rate"])
    assert (fee > 0) == late
    refund = b["total"] - fee
    checks = [row("cancelled", "bookings", {"id": b["id"]},
                  {"status": "cancelled", "cancel_fee": fee}),
              row("refund", "payments", {"booking_id": b["id"], "kind": "refund"},
                  {"amount": approx(refund)}),
              only(allow("bookings", {"id": b["id"]}), allow("payments", {"booking_id": b["id"]}))]
    if late:
        checks.append(said("told-fee", fee))
        quote = (f"Free cancellation has ended, so cancelling now costs one night, {money(fee)}; "
                 f"{money(refund)} is refunded. Cancel anyway?")
        replies = ["Does that cost anything?", "Okay, cancel it anyway."]
    else:
        quote = (f"Cancelling {b['id']} is free; {money(refund)} goes back to your cost center. "
                 "Cancel it?")
        replies = ["Yes, cancel it."]
    city = hotel["city"]
    return {
        "tags": ["cancel", "single-write"] + (["fee", "said"] if late else []),
        "user": {"instruction": f"{who(e)} Your trip to {city} is off: cancel booking {b['id']}."
                                + (" Ask whether it costs anything; accept a fee of one night."
                                   if late else ""),
                 "opening": rng.choice((f"Please cancel my hotel in {city}.",
                                        "I need to cancel a hotel booking.",
                                        f"My {city} trip is cancelled, can you cancel the room?")),
                 "script": [f"{e['email']}, booking {b['id']}.", *replies]},
        "checks": checks,
        "gold": [call("find_employee", email=e["email"]), call("get_booking", booking_id=b["id"]),
                 say(quote), call("cancel_booking", booking_id=b["id"])],
    }


def _lower_than(room: str) -> str:
    return {"suite": "deluxe", "deluxe": "standard", "standard": "economy"}[room]


def _downgrade_scene(s: Scene) -> tuple[dict, dict, dict, dict, str]:
    e, manager = s.traveller()
    room = s.rng.choice(("deluxe", "standard"))
    hotel = s.hotel(s.rng.choice(CITIES), e["travel_tier"], ("economy", "standard", "deluxe"))
    b = s.booking(e, hotel, room, *s.stay())
    return e, manager, hotel, b, _lower_than(room)


def downgrade_no_approval(s: Scene) -> dict:
    rng = s.rng
    e, manager, hotel, b, lower = _downgrade_scene(s)
    if rng.random() < 0.5:  # an approval for something else does not cover a downgrade
        moved = date.fromisoformat(b["check_in"]) + timedelta(days=1)
        s.approval(e, "date_change", "approved", b, check_in=day(moved),
                   check_out=day(moved + timedelta(days=nights_of(b))))
    reason = rng.choice(REASONS)
    city = hotel["city"]
    return {
        "tags": ["downgrade", "policy-trap", "approval", "said"],
        "user": {"instruction": f"{who(e)} You want booking {b['id']} in {city} changed from "
                                f"{b['room_type']} to {lower}. If told your manager must approve it, "
                                f"ask for the request to be filed (reason: \"{reason}\").",
                 "opening": rng.choice((f"Can you move me to a cheaper {lower} room in {city}?",
                                        f"I'd like to downgrade my {city} room.")),
                 "script": [(f"{e['email']}, booking {b['id']}. "
                             f"{article(lower).capitalize()} room, please."),
                            f"{reason} Yes, please file the request.", "Thanks."]},
        "checks": [untouched(b),
                   {"id": "no-new-payment", "kind": "count", "table": "payments",
                    "where": {"booking_id": b["id"]}, "expect": 1},
                   row("request-filed", "approval_requests",
                       {"booking_id": b["id"], "kind": "downgrade"},
                       {"room_type": lower, "status": "pending", "approver_id": manager["id"]}),
                   only(allow("approval_requests", {"booking_id": b["id"], "status": "pending"})),
                   TOLD_APPROVAL,
                   judge("named-approver", f"Did the agent tell the user that the downgrade needs "
                                           f"approval from their manager, {manager['name']}, and that "
                                           "the booking stays as it is until then?")],
        "gold": [call("find_employee", email=e["email"]), call("get_booking", booking_id=b["id"]),
                 say(f"A downgrade needs approval from your manager, {manager['name']}, first; the "
                     f"room stays {b['room_type']} for now. Shall I file the request?"),
                 call("file_approval_request", employee_id=e["id"], kind="downgrade",
                      booking_id=b["id"], room_type=lower, reason=reason, free=("reason",))],
    }


def downgrade_approved(s: Scene) -> dict:
    rng = s.rng
    e, _, hotel, b, lower = _downgrade_scene(s)
    s.approval(e, "downgrade", "approved", b, room=lower)
    nights, rate = nights_of(b), hotel["rates"][lower]
    refund = b["total"] - rate * nights
    return {
        "tags": ["downgrade", "approval", "single-write", "python-check"],
        "user": {"instruction": f"{who(e)} Your manager approved downgrading booking {b['id']} in "
                                f"{hotel['city']} to {article(lower)} room. Have it changed.",
                 "opening": rng.choice(("My downgrade was approved, can you apply it?",
                                        (f"I have approval to switch my {hotel['city']} room "
                                         f"to {lower}."))),
                 "script": [f"{e['email']}, booking {b['id']}.", "Yes, go ahead."]},
        "checks": [row("downgraded", "bookings", {"id": b["id"]},
                       {"room_type": lower, "nightly_rate": rate, "total": approx(rate * nights)}),
                   row("refund", "payments", {"booking_id": b["id"], "kind": "refund"},
                       {"amount": approx(refund)}),
                   settled(b),
                   only(allow("bookings", {"id": b["id"]}),
                        allow("payments", {"booking_id": b["id"]}))],
        "gold": [call("find_employee", email=e["email"]), call("get_booking", booking_id=b["id"]),
                 say(f"The approved request covers {article(lower)} room at {money(rate)} a night; "
                     f"{money(refund)} is refunded. Go ahead?"),
                 call("change_room_type", booking_id=b["id"], room_type=lower)],
    }


def _new_dates(s: Scene, b: dict) -> tuple[date, date]:
    start = date.fromisoformat(b["check_in"])
    nights = nights_of(b)
    shift, stretch = s.rng.choice(((1, 0), (2, 0), (-1, 0), (0, 1), (0, -1), (3, 1)))
    new_in = start + timedelta(days=shift)
    return new_in, new_in + timedelta(days=max(1, nights + stretch))


def date_change_no_approval(s: Scene) -> dict:
    rng = s.rng
    e, manager = s.traveller()
    hotel = s.hotel(rng.choice(CITIES), e["travel_tier"])
    b = s.booking(e, hotel, rng.choice(("standard", "deluxe")), *s.stay(8))
    new_in, new_out = _new_dates(s, b)
    if b["room_type"] == "deluxe" and rng.random() < 0.5:  # approved for something else
        s.approval(e, "downgrade", "approved", b, room="standard")
    reason = rng.choice(REASONS)
    return {
        "tags": ["date-change", "policy-trap", "approval", "said"],
        "user": {"instruction": f"{who(e)} Booking {b['id']} in {hotel['city']} should run from "
                                f"{day(new_in)} to {day(new_out)} instead. If told it needs approval, "
                                f"ask for the request to be filed (reason: \"{reason}\").",
                 "opening": rng.choice((f"I need different dates for my {hotel['city']} hotel.",
                                        "Can you change the dates of a hotel booking?")),
                 "script": [f"{e['email']}, booking {b['id']}: {spoken(new_in)} to {spoken(new_out)}.",
                            f"{reason} Please file it.", "Thanks."]},
        "checks": [untouched(b),
                   row("request-filed", "approval_requests",
                       {"booking_id": b["id"], "kind": "date_change"},
                       {"check_in": day(new_in), "check_out": day(new_out), "status": "pending",
                        "approver_id": manager["id"]}),
                   only(allow("approval_requests", {"booking_id": b["id"], "status": "pending"})),
                   TOLD_APPROVAL],
        "gold": [call("find_employee", email=e["email"]), call("get_booking", booking_id=b["id"]),
                 say(f"Date changes need your manager's approval first; I can't move the booking yet. "
                     f"I can file a request with {manager['name']} for {spoken(new_in)} to "
                     f"{spoken(new_out)}. File it?"),
                 call("file_approval_request", employee_id=e["id"], kind="date_change",
                      booking_id=b["id"], check_in=day(new_in), check_out=day(new_out),
                      reason=reason, free=("reason",))],
    }


def date_change_approved(s: Scene) -> dict:
    rng = s.rng
    e, _ = s.traveller()
    hotel = s.hotel(rng.choice(CITIES), e["travel_tier"])
    b = s.booking(e, hotel, rng.choice(("standard", "deluxe")), *s.stay(8))
    new_in, new_out = _new_dates(s, b)
    s.approval(e, "date_change", "approved", b, check_in=day(new_in), check_out=day(new_out))
    total = b["nightly_rate"] * (new_out - new_in).days
    diff = total - b["total"]
    allowed = [allow("bookings", {"id": b["id"]})]
    if diff:
        kind = "charge" if diff > 0 else "refund"
        allowed.append(allow("payments", {"booking_id": b["id"], "kind": kind}))
    cost = ("the total stays the same" if not diff else
            f"{money(abs(diff))} is {'charged' if diff > 0 else 'refunded'}")
    return {
        "tags": ["date-change", "approval", "single-write", "python-check"],
        "user": {"instruction": f"{who(e)} Your manager approved moving booking {b['id']} in "
                                f"{hotel['city']} to {day(new_in)} to {day(new_out)}. "
                                "Have it changed.",
                 "opening": rng.choice(("My date change was approved, please update my hotel.",
                                        (f"I got approval for new dates on my {hotel['city']} "
                                         "booking."))),
                 "script": [f"{e['email']}, booking {b['id']}.", "Yes, change it."]},
        "checks": [row("moved", "bookings", {"id": b["id"]},
                       {"check_in": day(new_in), "check_out": day(new_out), "total": approx(total),
                        "room_type": b["room_type"]}),
                   settled(b), only(*allowed)],
        "gold": [call("find_employee", email=e["email"]), call("get_booking", booking_id=b["id"]),
                 say(f"The approved request covers {spoken(new_in)} to {spoken(new_out)} at your "
                     f"booked rate; {cost}. Go ahead?"),
                 call("change_dates", booking_id=b["id"], check_in=day(new_in),
                      check_out=day(new_out))],
    }


def over_cap_request(s: Scene) -> dict:
    rng = s.rng
    e, manager = s.traveller(rng.choice(("standard", "senior")))
    city = rng.choice(CITIES)
    hotel = s.hotel(city, e["travel_tier"])
    check_in, nights = s.stay()
    check_out = check_in + timedelta(days=nights)
    limit, rate = cap(e["travel_tier"], city), hotel["rates"]["suite"]
    reason = rng.choice(("I'm hosting client meetings in the room.", "I need space to run workshops.",
                         "The team will work from my room."))
    return {
        "tags": ["book", "rate-cap", "policy-trap", "approval", "said"],
        "user": {"instruction": f"{who(e)} You want a suite at the {hotel['name']} from "
                                f"{day(check_in)} to {day(check_out)}. If told it is above your "
                                "cap, ask for it to go to your manager for approval (reason: "
                                f"\"{reason}\"); do not take a cheaper room.",
                 "opening": rng.choice((f"Please book me a suite in {city}.",
                                        f"I need a suite for my {city} trip.")),
                 "script": [(f"{e['email']}. The {hotel['name']}, {spoken(check_in)} to "
                             f"{spoken(check_out)}."), f"{reason} Please ask for approval.",
                            "Thanks."]},
        "checks": [{"id": "not-booked", "kind": "absent", "table": "bookings",
                    "where": {"employee_id": e["id"]}},
                   row("request-filed", "approval_requests", {"employee_id": e["id"]},
                       {"kind": "over_cap", "hotel_id": hotel["id"], "room_type": "suite",
                        "check_in": day(check_in), "check_out": day(check_out), "status": "pending",
                        "approver_id": manager["id"]}),
                   only(allow("approval_requests", {"employee_id": e["id"]})),
                   said("told-cap", limit)],
        "gold": [call("find_employee", email=e["email"]),
                 call("get_rate_cap", employee_id=e["id"], city=city),
                 call("get_hotel", hotel_id=hotel["id"]),
                 say(f"The suite is {money(rate)} a night, above your {money(limit)} cap in {city}, "
                     f"so I can't book it. I can ask {manager['name']} to approve it. Shall I?"),
                 call("file_approval_request", employee_id=e["id"], kind="over_cap",
                      hotel_id=hotel["id"], room_type="suite", check_in=day(check_in),
                      check_out=day(check_out), reason=reason, free=("reason",))],
    }


def booking_total_lookup(s: Scene) -> dict:
    rng = s.rng
    e, _ = s.traveller()
    cities = rng.sample(CITIES, rng.randint(2, 3))
    bookings, start = [], TODAY + timedelta(days=rng.randint(5, 15))
    for c in cities:  # one trip after another
        hotel = s.hotel(c, e["travel_tier"])
        bookings.append(s.booking(e, hotel, rng.choice(("standard", "deluxe")), start,
                                  rng.randint(2, 4)))
        start = date.fromisoformat(bookings[-1]["check_out"]) + timedelta(days=rng.randint(3, 15))
    asked = rng.choice(bookings)
    city = cities[bookings.index(asked)]
    return {
        "tags": ["lookup", "read-only", "said"],
        "user": {"instruction": f"{who(e)} You want to know the total cost of your upcoming hotel "
                                f"booking in {city} (you don't know its booking id).",
                 "opening": rng.choice((f"How much is my {city} hotel costing in total?",
                                        f"What's the total for my hotel stay in {city}?")),
                 "script": [f"It's {e['email']}."]},
        "checks": [said("told-total", asked["total"]), only()],
        "gold": [call("find_employee", email=e["email"]),
                 call("list_bookings", employee_id=e["id"], status="confirmed"),
                 say(f"Your {city} booking {asked['id']} comes to {money(asked['total'])} in total.")],
    }


TEMPLATES = {
    "book-within-cap": book_within_cap,
    "cancel-booking": cancel_booking,
    "downgrade-no-approval": downgrade_no_approval,
    "downgrade-approved": downgrade_approved,
    "date-change-no-approval": date_change_no_approval,
    "date-change-approved": date_change_approved,
    "over-cap-request": over_cap_request,
    "booking-total-lookup": booking_total_lookup,
}


if __name__ == "__main__":
    taskgen.print_jsonl(taskgen.generate("travel", TEMPLATES, PER_TEMPLATE, SEED, Scene, Ids()))
