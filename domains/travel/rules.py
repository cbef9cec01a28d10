"""The hard rules of a stay, which the travel tools enforce themselves: valid dates, rooms
available on every night, no overlapping stays for one traveller, changes and cancellations only
before the stay starts, the cancellation fee, and the difference of a change charged or refunded.
The company's rules (manager approval, rate caps, who may book for whom) are policy.md's; no tool
enforces them.
"""

from datetime import date, datetime, timedelta

from endstate.api import Db, ToolError, iso_date

NOW = "2026-03-02T09:00:00"  # the domain's clock; tools.py hands it to endstate
TODAY = NOW[:10]
CHECK_IN_HOUR = 15
MAX_NIGHTS = 30


def room(db: Db, hotel_id: str, room_type: str) -> dict:
    """The hotel's room_types row of that type; the error names the types it offers."""
    db.get("hotels", hotel_id, "hotel")  # an unknown hotel is named as such, not as a room type
    room = db.one("SELECT * FROM room_types WHERE hotel_id = ? AND code = ?", hotel_id, room_type)
    if room is None:
        offered = [r["code"] for r in db.all("SELECT code FROM room_types WHERE hotel_id = ? "
                                             "ORDER BY rank", hotel_id)]
        raise ToolError(f"hotel {hotel_id} has no {room_type} rooms; it offers {', '.join(offered)}")
    return room


def nights(check_in: str, check_out: str) -> int:
    """Nights between two YYYY-MM-DD dates; the stay must not start before today. The dates are
    stored as given: only YYYY-MM-DD itself is taken (fromisoformat also reads 20260501)."""
    try:
        start, end = date.fromisoformat(check_in), date.fromisoformat(check_out)
    except ValueError:
        start = end = None
    if start is None or (start.isoformat(), end.isoformat()) != (check_in, check_out):
        raise ToolError(f"dates must be YYYY-MM-DD, got {check_in!r} and {check_out!r}")
    iso_date(check_out, "check_out")  # within the dates any tool takes
    nights = (end - start).days
    if nights < 1:
        raise ToolError(f"check-out {check_out} must be after check-in {check_in}")
    if nights > MAX_NIGHTS:
        raise ToolError(f"a booking covers at most {MAX_NIGHTS} nights")
    if check_in < TODAY:
        raise ToolError(f"check-in {check_in} is in the past; today is {TODAY}")
    return nights


def available(db: Db, hotel_id: str, room_type: str, check_in: str, check_out: str,
              ignore_booking: str = "") -> int:
    """Rooms of this type free on every night of the stay (confirmed bookings hold a room)."""
    rooms = db.value("SELECT rooms FROM room_types WHERE hotel_id = ? AND code = ?", hotel_id,
                     room_type)
    held = db.all("SELECT check_in, check_out FROM bookings WHERE hotel_id = ? AND room_type = ? "
                  "AND status = 'confirmed' AND check_in < ? AND check_out > ? AND id != ?",
                  hotel_id, room_type, check_out, check_in, ignore_booking)
    night, end, free = date.fromisoformat(check_in), date.fromisoformat(check_out), rooms
    while night < end:
        taken = sum(1 for h in held if h["check_in"] <= night.isoformat() < h["check_out"])
        free = min(free, rooms - taken)
        night += timedelta(days=1)
    return max(free, 0)


def no_overlap(db: Db, employee_id: str, check_in: str, check_out: str,
               ignore_booking: str = "") -> None:
    """A traveller holds at most one confirmed stay on any night."""
    clash = db.one("SELECT id, check_in, check_out FROM bookings WHERE employee_id = ? AND "
                   "status = 'confirmed' AND check_in < ? AND check_out > ? AND id != ?",
                   employee_id, check_out, check_in, ignore_booking)
    if clash:
        raise ToolError(f"employee {employee_id} already has booking {clash['id']} from "
                        f"{clash['check_in']} to {clash['check_out']}")


def changeable(booking: dict) -> None:
    """Only a confirmed booking whose stay has not started can be changed or cancelled."""
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking['id']} is {booking['status']}")
    if booking["check_in"] < TODAY:
        raise ToolError(f"the stay of booking {booking['id']} started on {booking['check_in']}; "
                        "a stay in progress cannot be changed or cancelled here")


def requested_change(db: Db, kind: str, booking: dict | None, hotel_id: str | None,
                     room_type: str | None, check_in: str | None,
                     check_out: str | None) -> tuple[str | None, str | None, str | None]:
    """(room_type, check_in, check_out) an approval request of `kind` records, once checked: a
    downgrade names a lower room type of a booking, a date change a booking's valid new dates, an
    over-cap request a room type and a stay (the booking's, or new dates at `hotel_id`)."""
    if kind == "downgrade":
        if not booking or not room_type:
            raise ToolError("a downgrade request needs booking_id and room_type")
        new, old = room(db, hotel_id, room_type), room(db, hotel_id, booking["room_type"])
        if new["rank"] >= old["rank"]:
            raise ToolError(f"{room_type} is not below the booked {booking['room_type']}")
        return room_type, None, None
    if kind == "date_change":
        if not booking or not (check_in and check_out):
            raise ToolError("a date change request needs booking_id, check_in and check_out")
        nights(check_in, check_out)
        return None, check_in, check_out
    if not room_type or not hotel_id:
        raise ToolError("an over_cap request needs room_type and a booking_id or hotel_id")
    if booking:
        check_in, check_out = booking["check_in"], booking["check_out"]
    elif not (check_in and check_out):
        raise ToolError("an over_cap request for a new booking needs check_in and check_out")
    room(db, hotel_id, room_type)
    nights(check_in, check_out)
    return room_type, check_in, check_out


def settle(db: Db, booking: dict, new_total: float) -> dict | None:
    """Charge or refund the difference to the booking's cost center; the payment row, if any."""
    diff = round(new_total - booking["total"], 2)
    if diff == 0:
        return None
    payment_id = db.next_id("payments", "PY", 6)
    kind = "charge" if diff > 0 else "refund"
    db.run("INSERT INTO payments VALUES (?, ?, ?, ?, ?, ?)", payment_id, booking["id"], kind,
           abs(diff), booking["cost_center"], db.now)
    return {"payment_id": payment_id, "kind": kind, "amount": abs(diff)}


def cancellation_fee(db: Db, booking: dict) -> tuple[float, str]:
    """(fee if cancelled now, free-cancellation deadline)."""
    window = db.value("SELECT cancel_window_hours FROM hotels WHERE id = ?", booking["hotel_id"])
    deadline = datetime.fromisoformat(booking["check_in"]) + timedelta(hours=CHECK_IN_HOUR - window)
    fee = 0.0 if datetime.fromisoformat(NOW) < deadline else booking["nightly_rate"]
    return fee, deadline.strftime("%Y-%m-%dT%H:%M:%S")
