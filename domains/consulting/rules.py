"""What the consulting tools compute the same way: a period, the rate a client's card
gives a level, a consultant's booked hours and time off over a period, and an engagement's fees
billed. The tools and checks.py read the firm's rules through these."""

from endstate.api import Db, ToolError, iso_date

NOW = "2026-03-16T09:00:00"  # a Monday


def period(start_date: str, end_date: str) -> tuple[str, str]:
    start, end = iso_date(start_date, "start_date"), iso_date(end_date, "end_date")
    if end < start:
        raise ToolError("end_date is before start_date")
    return start, end


def card_rate(db: Db, client_id: str) -> dict[str, float]:
    """Level -> hourly rate on the client's rate card (the standard card for a level its own card
    does not list)."""
    card = db.value("SELECT rate_card FROM clients WHERE id = ?", client_id)
    rates = {r["level"]: r["hourly_rate"] for r in db.all(
        "SELECT level, hourly_rate FROM rate_cards WHERE rate_card = 'standard'")}
    rates.update({r["level"]: r["hourly_rate"] for r in db.all(
        "SELECT level, hourly_rate FROM rate_cards WHERE rate_card = ?", card)})
    return rates


def booked(db: Db, employee_id: str, start: str, end: str,
           skip: str | None = None) -> tuple[float, list[dict]]:
    """(hours a week, the assignments) of the employee's assignments overlapping start..end, but
    `skip`."""
    rows = db.all("SELECT a.id, a.engagement_id, e.name AS engagement, a.hours_per_week, "
                  "a.start_date, a.end_date FROM assignments a JOIN engagements e "
                  "ON e.id = a.engagement_id WHERE a.employee_id = ? AND a.start_date <= ? "
                  "AND a.end_date >= ? AND a.id IS NOT ? ORDER BY a.start_date, a.id",
                  employee_id, end, start, skip)
    return round(sum(r["hours_per_week"] for r in rows), 2), rows


def time_off(db: Db, employee_id: str, start: str, end: str) -> list[dict]:
    return db.all("SELECT start_date, end_date, kind FROM time_off WHERE employee_id = ? "
                  "AND start_date <= ? AND end_date >= ? ORDER BY start_date", employee_id, end,
                  start)


def billed(db: Db, engagement_id: str) -> float:
    """Fees invoiced on the engagement so far: every invoice but the void ones, drafts included."""
    return round(db.value("SELECT coalesce(sum(amount), 0) FROM invoices WHERE engagement_id = ? "
                          "AND status != 'void'", engagement_id), 2)
