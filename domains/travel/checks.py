"""Named Python checks for travel tasks: for what the declarative check kinds cannot express.

Each receives the read-only terminal-state connection, the transcript and the check's `params`, and
returns (passed, detail).
"""

import sqlite3


def payments_settle(db: sqlite3.Connection, messages: list, booking_id: str):
    """The booking's charges less its refunds equal what it costs now: its total while it stands,
    its cancellation fee once cancelled."""
    row = db.execute("SELECT status, total, cancel_fee FROM bookings WHERE id = ?",
                     (booking_id,)).fetchone()
    if row is None:
        return False, f"booking {booking_id} not found"
    status, total, fee = row
    due = (fee or 0.0) if status == "cancelled" else total
    paid = db.execute("SELECT COALESCE(SUM(CASE kind WHEN 'charge' THEN amount ELSE -amount END), 0) "
                      "FROM payments WHERE booking_id = ?", (booking_id,)).fetchone()[0]
    if abs(paid - due) > 0.005:
        return False, (f"bookings[{booking_id}]: payments net {paid:.2f} but the booking costs "
                       f"{due:.2f}")
    return True, f"bookings[{booking_id}]: payments net {paid:.2f}, as due"


def bookings_within_cap(db: sqlite3.Connection, messages: list, employee_id: str):
    """Every confirmed upcoming booking of the employee has a nightly rate within their tier's cap
    for the hotel's city, unless an approved over_cap request covers that room."""
    rows = db.execute(
        "SELECT b.id, b.nightly_rate, b.hotel_id, b.room_type, h.city, e.travel_tier FROM bookings b "
        "JOIN hotels h ON h.id = b.hotel_id JOIN employees e ON e.id = b.employee_id "
        "WHERE b.employee_id = ? AND b.status = 'confirmed' ORDER BY b.id", (employee_id,)).fetchall()
    for booking_id, rate, hotel_id, room_type, city, tier in rows:
        cap = db.execute("SELECT nightly_cap FROM rate_caps WHERE tier = ? AND city IN (?, '*') "
                         "ORDER BY city = '*' LIMIT 1", (tier, city)).fetchone()[0]
        if rate <= cap:
            continue
        approved = db.execute(
            "SELECT id FROM approval_requests WHERE employee_id = ? AND kind = 'over_cap' AND "
            "status = 'approved' AND hotel_id = ? AND room_type = ?",
            (employee_id, hotel_id, room_type)).fetchone()
        if approved is None:
            return False, (f"bookings[{booking_id}].nightly_rate: {rate} is above the {tier} cap of "
                           f"{cap} in {city}, with no approved over_cap request")
    return True, f"{len(rows)} confirmed booking(s) of {employee_id} within the rate cap"
