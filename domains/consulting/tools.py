"""Consulting firm tools (staffing and time; invoices and approvals are in billing.py). Each is a
typed function: the signature and docstring are what the agent sees.

The tools enforce what the firm's systems enforce: dates and hours that make sense, no time logged
for a future day, only submitted time is approved or rejected, an assignment on an active
engagement. The firm's rules live in policy.md and the task checks verify them; none of these
tools asks *who* is asking. Above all:

- assign_consultant does not compare the hours with the consultant's free capacity or time off,
  nor the rate with the client's rate card;
- log_time does not check that the consultant is assigned to the engagement on that day;
- approve_time approves for any approver, their own time included;
- create_invoice (billing.py) bills submitted time as readily as approved time, and past the
  engagement's budget; issue_invoice issues any amount without the partner's approval.
"""

from endstate.api import (
    Db,
    ToolError,
    employee_finder,
    iso_date,
    positive_cents,
    rounded_within,
    tool,
)

from . import rules

NOW = rules.NOW
# the tools' bookkeeping timestamp: a task's reward does not hang on it (core.grading.footprint)
FREE = ("updated_at",)

# Example turns shown to token-level agents before the conversation (few-shot). Small models emit
# well-formed tool calls only after seeing a few. The entities are fictional: no task uses them.
EXAMPLES = [
    {"user": "Hi, this is ana.lopes@alderfinch.example. I need help with my timesheet.",
     "tool": "find_employee", "arguments": {"email": "ana.lopes@alderfinch.example"},
     "result": {"employee_id": "E0000"}, "reply": "Thanks, I found your profile."},
    {"user": "Who manages engagement EN0002?",
     "tool": "get_engagement", "arguments": {"engagement_id": "EN0002"},
     "result": {"id": "EN0002", "manager": {"id": "E0003", "name": "Ken Ito"}},
     "reply": "Ken Ito manages EN0002."},
    {"user": "Please issue invoice IN00004, it's ready.",
     "tool": "issue_invoice", "arguments": {"invoice_id": "IN00004"},
     "result": {"invoice_id": "IN00004", "status": "issued"}, "reply": "Invoice IN00004 is issued."},
]


# -- people and engagements ----------------------------------------------------------------------

find_employee = employee_finder("alderfinch.example")


@tool
def get_employee(db: Db, employee_id: str) -> dict:
    """Get an employee: level, practice, weekly capacity, their assignments that have not ended,
    and their time off to come.

    Args:
        employee_id: The employee id, e.g. "E0042".
    """
    employee = db.get("employees", employee_id, "employee")
    now = db.today
    employee["assignments"] = db.all(
        "SELECT a.id, a.engagement_id, e.name AS engagement, a.hours_per_week, a.start_date, "
        "a.end_date, a.bill_rate FROM assignments a JOIN engagements e ON e.id = a.engagement_id "
        "WHERE a.employee_id = ? AND a.end_date >= ? ORDER BY a.start_date, a.id", employee_id, now)
    employee["time_off"] = rules.time_off(db, employee_id, now, "9999-12-31")
    return employee


@tool
def get_availability(db: Db, employee_id: str, start_date: str, end_date: str) -> dict:
    """An employee's weekly hours already booked over a period (the assignments overlapping it),
    the hours a week still free, and their time off in it.

    Args:
        employee_id: The employee id.
        start_date: First day of the period (YYYY-MM-DD).
        end_date: Last day of the period (YYYY-MM-DD).
    """
    employee = db.get("employees", employee_id, "employee")
    start, end = rules.period(start_date, end_date)
    hours, rows = rules.booked(db, employee_id, start, end)
    return {"employee_id": employee_id, "weekly_capacity": employee["weekly_capacity"],
            "booked_hours_per_week": hours,
            "free_hours_per_week": max(0.0, round(employee["weekly_capacity"] - hours, 2)),
            "assignments": rows, "time_off": rules.time_off(db, employee_id, start, end)}


@tool
def find_available(db: Db, level: str, practice: str, start_date: str, end_date: str,
                   hours_per_week: float) -> list:
    """Employees of a level and practice with at least this many free hours a week over a period
    and no time off in it (at most 10).

    Args:
        level: analyst, consultant, senior, manager or partner.
        practice: strategy, operations, technology or finance.
        start_date: First day (YYYY-MM-DD).
        end_date: Last day (YYYY-MM-DD).
        hours_per_week: The hours a week needed.
    """
    start, end = rules.period(start_date, end_date)
    found = []
    for e in db.all("SELECT id, name, weekly_capacity FROM employees WHERE level = ? AND "
                    "practice = ? ORDER BY id", level.strip().lower(), practice.strip().lower()):
        hours, _ = rules.booked(db, e["id"], start, end)
        free = round(e["weekly_capacity"] - hours, 2)
        if free >= hours_per_week and not rules.time_off(db, e["id"], start, end):
            found.append({"employee_id": e["id"], "name": e["name"], "free_hours_per_week": free})
            if len(found) == 10:
                break
    return found


@tool
def get_engagement(db: Db, engagement_id: str) -> dict:
    """Get an engagement: client, manager, partner, budget and fees billed so far, its staffing,
    and its client's rate card (hourly rate per level).

    Args:
        engagement_id: The engagement id, e.g. "EN0042".
    """
    engagement = db.get("engagements", engagement_id, "engagement")
    for role in ("manager", "partner"):
        engagement[role] = db.one("SELECT id, name, email FROM employees WHERE id = ?",
                                  engagement.pop(f"{role}_id"))
    engagement["client"] = db.one("SELECT id, name, rate_card FROM clients WHERE id = ?",
                                  engagement.pop("client_id"))
    engagement["rate_card"] = rules.card_rate(db, engagement["client"]["id"])
    engagement["billed_to_date"] = rules.billed(db, engagement_id)
    engagement["assignments"] = db.all(
        "SELECT a.id, a.employee_id, m.name, m.level, a.hours_per_week, a.start_date, a.end_date, "
        "a.bill_rate FROM assignments a JOIN employees m ON m.id = a.employee_id "
        "WHERE a.engagement_id = ? ORDER BY a.start_date, a.id", engagement_id)
    return engagement


@tool
def find_client(db: Db, name: str) -> list:
    """Clients whose name contains the given text, with their active engagements.

    Args:
        name: Part of the client's name, e.g. "Northbeam".
    """
    clients = db.all("SELECT id, name, industry, rate_card FROM clients "
                     "WHERE instr(lower(name), lower(?)) > 0 ORDER BY id LIMIT 10", name.strip())
    for c in clients:
        c["engagements"] = db.all("SELECT id, name, start_date, end_date FROM engagements "
                                  "WHERE client_id = ? AND status = 'active' ORDER BY id", c["id"])
    return clients


# -- staffing ----------------------------------------------------------------------------------

@tool(writes=True)
def assign_consultant(db: Db, engagement_id: str, employee_id: str, hours_per_week: float,
                      start_date: str, end_date: str, bill_rate: float) -> dict:
    """Staff an employee on an engagement for a period.

    Args:
        engagement_id: The engagement id.
        employee_id: The employee to staff.
        hours_per_week: Hours a week on this engagement (1-60).
        start_date: First day (YYYY-MM-DD).
        end_date: Last day (YYYY-MM-DD).
        bill_rate: The hourly rate the client is invoiced for this person's time.
    """
    engagement = db.get("engagements", engagement_id, "engagement")
    if engagement["status"] != "active":
        raise ToolError(f"engagement {engagement_id} is {engagement['status']}")
    db.get("employees", employee_id, "employee")
    start, end = rules.period(start_date, end_date)
    hours = rounded_within(hours_per_week, 1, 60, "hours_per_week")
    rate = positive_cents(bill_rate, "bill_rate")
    assignment_id = db.next_id("assignments", "AS", 5)
    db.run("INSERT INTO assignments VALUES (?, ?, ?, ?, ?, ?, ?, ?)", assignment_id, engagement_id,
           employee_id, hours, start, end, rate, db.now)
    return {"assignment_id": assignment_id, "hours_per_week": hours, "bill_rate": rate}


@tool(writes=True)
def change_assignment(db: Db, assignment_id: str, hours_per_week: float | None = None,
                      end_date: str | None = None) -> dict:
    """Change an assignment's hours a week or its last day (to end it early or extend it).

    Args:
        assignment_id: The assignment id, e.g. "AS00042".
        hours_per_week: The new hours a week (1-60).
        end_date: The new last day (YYYY-MM-DD), not before its first.
    """
    a = db.get("assignments", assignment_id, "assignment")
    hours = (a["hours_per_week"] if hours_per_week is None
             else rounded_within(hours_per_week, 1, 60, "hours_per_week"))
    end = a["end_date"] if end_date is None else iso_date(end_date, "end_date")
    if end < a["start_date"]:
        raise ToolError(f"end_date {end} is before the assignment's start {a['start_date']}")
    db.run("UPDATE assignments SET hours_per_week = ?, end_date = ? WHERE id = ?", hours, end,
           assignment_id)
    return {"assignment_id": assignment_id, "hours_per_week": hours, "end_date": end}


# -- time ----------------------------------------------------------------------------------------

@tool
def list_time_entries(db: Db, engagement_id: str, status: str | None = None,
                      employee_id: str | None = None, since: str | None = None,
                      until: str | None = None) -> list:
    """An engagement's time entries, oldest first (at most 200).

    Args:
        engagement_id: The engagement id.
        status: Only entries with this status (submitted, approved, rejected, billed).
        employee_id: Only this employee's entries.
        since: Only entries on or after this date (YYYY-MM-DD).
        until: Only entries on or before this date (YYYY-MM-DD).
    """
    db.get("engagements", engagement_id, "engagement")
    sql = ("SELECT t.id, t.employee_id, m.name, t.work_date, t.hours, t.description, t.status, "
           "t.approved_by, t.invoice_id FROM time_entries t JOIN employees m ON m.id = "
           "t.employee_id WHERE t.engagement_id = ?")
    params: list = [engagement_id]
    for clause, value in ((" AND t.status = ?", status), (" AND t.employee_id = ?", employee_id),
                          (" AND t.work_date >= ?", since and iso_date(since, "since")),
                          (" AND t.work_date <= ?", until and iso_date(until, "until"))):
        if value:
            sql += clause
            params.append(value)
    return db.all(sql + " ORDER BY t.work_date, t.id LIMIT 200", *params)


@tool(writes=True)
def log_time(db: Db, employee_id: str, engagement_id: str, work_date: str, hours: float,
             description: str) -> dict:
    """Log hours an employee worked on an engagement on one day; the entry awaits approval.

    Args:
        employee_id: Who worked.
        engagement_id: The engagement worked on.
        work_date: The day worked (YYYY-MM-DD), today or earlier.
        hours: Hours worked that day (0.25-24).
        description: What was done.
    """
    db.get("employees", employee_id, "employee")
    db.get("engagements", engagement_id, "engagement")
    worked = iso_date(work_date, "work_date")
    if worked > db.today:
        raise ToolError(f"work_date {worked} is in the future")
    hours = rounded_within(hours, 0.25, 24, "hours")
    entry_id = db.next_id("time_entries", "TE", 6)
    db.run("INSERT INTO time_entries VALUES (?, ?, ?, ?, ?, ?, 'submitted', NULL, NULL, NULL, ?)",
           entry_id, employee_id, engagement_id, worked, hours, description.strip(),
           db.now)
    return {"time_entry_id": entry_id, "status": "submitted"}


def _submitted(db: Db, entry_id: str) -> dict:
    entry = db.get("time_entries", entry_id, "time entry")
    if entry["status"] != "submitted":
        raise ToolError(f"time entry {entry_id} is {entry['status']}, not submitted")
    return entry


@tool(writes=True)
def approve_time(db: Db, time_entry_ids: list[str], approver_id: str) -> dict:
    """Approve submitted time entries, so that they can be invoiced.

    Args:
        time_entry_ids: The entries to approve, e.g. ["TE000123", "TE000124"].
        approver_id: The employee id of the person approving.
    """
    db.get("employees", approver_id, "employee")
    if not time_entry_ids:
        raise ToolError("give at least one time entry id")
    for entry_id in time_entry_ids:
        _submitted(db, entry_id)
        db.run("UPDATE time_entries SET status = 'approved', approved_by = ?, updated_at = ? "
               "WHERE id = ?", approver_id, db.now, entry_id)
    return {"approved": list(time_entry_ids), "approved_by": approver_id}


@tool(writes=True)
def reject_time(db: Db, time_entry_id: str, approver_id: str, reason: str) -> dict:
    """Send a submitted time entry back to its author with the reason.

    Args:
        time_entry_id: The entry to reject.
        approver_id: The employee id of the person rejecting it.
        reason: What is wrong with it.
    """
    db.get("employees", approver_id, "employee")
    _submitted(db, time_entry_id)
    db.run("UPDATE time_entries SET status = 'rejected', approved_by = ?, note = ?, "
           "updated_at = ? WHERE id = ?", approver_id, reason.strip(), db.now, time_entry_id)
    return {"time_entry_id": time_entry_id, "status": "rejected"}


# invoices and approvals: listed after the tools above, as the agent sees them
from .billing import create_invoice, get_invoice, issue_invoice, request_approval  # noqa: F401
