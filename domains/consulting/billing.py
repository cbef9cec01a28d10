"""Consulting firm tools for invoices and the approval chain (tools.py imports them, so that they
are the domain's tools too). See tools.py for the rules these tools leave to policy.md."""

from typing import Literal

from endstate.api import Db, ToolError, positive_cents, tool


@tool
def get_invoice(db: Db, invoice_id: str) -> dict:
    """Get an invoice with its lines, and the approval requests that concern it.

    Args:
        invoice_id: The invoice id, e.g. "IN00042".
    """
    invoice = db.get("invoices", invoice_id, "invoice")
    invoice["lines"] = db.all("SELECT l.line, l.employee_id, l.time_entry_id, t.work_date, "
                              "l.hours, l.rate, l.amount FROM invoice_lines l LEFT JOIN "
                              "time_entries t ON t.id = l.time_entry_id WHERE l.invoice_id = ? "
                              "ORDER BY l.line", invoice_id)
    invoice["approvals"] = db.all("SELECT id, kind, amount, approver_id, status FROM approvals "
                                  "WHERE reference = ? ORDER BY id", invoice_id)
    return invoice


@tool(writes=True)
def create_invoice(db: Db, engagement_id: str, time_entry_ids: list[str]) -> dict:
    """Create a draft invoice billing time entries of an engagement, each at its person's bill
    rate on the engagement; the entries become billed.

    Args:
        engagement_id: The engagement id.
        time_entry_ids: The time entries to bill, e.g. ["TE000123", "TE000124"].
    """
    db.get("engagements", engagement_id, "engagement")
    if not time_entry_ids:
        raise ToolError("give at least one time entry id")
    invoice_id = db.next_id("invoices", "IN", 5)
    lines = []
    for entry_id in dict.fromkeys(time_entry_ids):
        entry = db.get("time_entries", entry_id, "time entry")
        if entry["engagement_id"] != engagement_id:
            raise ToolError(f"time entry {entry_id} is not on engagement {engagement_id}")
        if entry["status"] in ("billed", "rejected"):
            raise ToolError(f"time entry {entry_id} is {entry['status']}")
        rate = db.value("SELECT bill_rate FROM assignments WHERE engagement_id = ? AND "
                        "employee_id = ? ORDER BY start_date <= ? DESC, start_date DESC LIMIT 1",
                        engagement_id, entry["employee_id"], entry["work_date"])
        if rate is None:
            raise ToolError(f"{entry['employee_id']} has no assignment on {engagement_id}, so "
                            f"time entry {entry_id} has no bill rate")
        lines.append((entry["employee_id"], entry_id, entry["hours"], rate,
                      round(entry["hours"] * rate, 2)))
    total = round(sum(line[-1] for line in lines), 2)
    db.run("INSERT INTO invoices VALUES (?, ?, ?, 'draft', ?, NULL)", invoice_id, engagement_id,
           total, db.now)
    for n, (employee_id, entry_id, hours, rate, amount) in enumerate(lines, 1):
        db.run("INSERT INTO invoice_lines VALUES (?, ?, ?, ?, ?, ?, ?)", invoice_id, n,
               employee_id, entry_id, hours, rate, amount)
        db.run("UPDATE time_entries SET status = 'billed', invoice_id = ?, updated_at = ? "
               "WHERE id = ?", invoice_id, db.now, entry_id)
    return {"invoice_id": invoice_id, "status": "draft", "amount": total, "lines": len(lines)}


@tool(writes=True)
def issue_invoice(db: Db, invoice_id: str) -> dict:
    """Send a draft invoice to the client.

    Args:
        invoice_id: The invoice id, e.g. "IN00042".
    """
    invoice = db.get("invoices", invoice_id, "invoice")
    if invoice["status"] != "draft":
        raise ToolError(f"invoice {invoice_id} is {invoice['status']}, not a draft")
    db.run("UPDATE invoices SET status = 'issued', issued_at = ? WHERE id = ?", db.now, invoice_id)
    return {"invoice_id": invoice_id, "status": "issued", "amount": invoice["amount"]}


@tool(writes=True)
def request_approval(db: Db, kind: Literal["rate_exception", "invoice", "change_order"],
                     reference: str, amount: float, requested_by: str, approver_id: str,
                     note: str, employee_id: str | None = None) -> dict:
    """Ask for an approval in the firm's approval chain; the approver decides within 2 business
    days.

    Args:
        kind: rate_exception (bill a consultant below the rate card), invoice (issue a large
            invoice), change_order (bill past the engagement's budget).
        reference: The engagement id (rate_exception, change_order) or the invoice id (invoice).
        amount: The hourly rate asked for (rate_exception), the invoice's amount (invoice), or
            the new budget asked for (change_order), in dollars.
        requested_by: The employee id of the person asking.
        approver_id: The employee id of the person who must approve.
        note: Why it is needed.
        employee_id: rate_exception only: the consultant whose rate it is.
    """
    db.get("employees", requested_by, "employee")
    db.get("employees", approver_id, "employee")
    table, what = ("invoices", "invoice") if kind == "invoice" else ("engagements", "engagement")
    db.get(table, reference, what)
    amount = positive_cents(amount)
    if kind == "rate_exception" and employee_id is None:
        raise ToolError("a rate_exception names the consultant: give employee_id")
    if db.one("SELECT id FROM approvals WHERE kind = ? AND reference = ? AND employee_id IS ? "
              "AND status = 'pending'", kind, reference, employee_id):
        raise ToolError(f"a {kind} approval for {reference} is already pending")
    approval_id = db.next_id("approvals", "AP", 5)
    db.run("INSERT INTO approvals VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL)", approval_id,
           kind, reference, employee_id, amount, requested_by, approver_id, note.strip(),
           db.now)
    return {"approval_id": approval_id, "status": "pending"}
