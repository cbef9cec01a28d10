"""Support tools. Each is a typed function: the signature and docstring are what the agent sees.

The tools enforce the hard rules themselves (one open exception per shipment, exception kinds that
fit the shipment's status, claims only for lost or damaged goods and at most the declared value,
a $200 ceiling on any credit, reopening only recently resolved tickets). Other rules live only in
policy.md, as in a real help desk, and the task checks verify them: above all, resolve_ticket does
not check the carrier exception: resolving a ticket whose exception is still open is the trap.
Credit caps per tier, one claim per exception and the five-day wait before reporting a shipment
lost are policy-only as well.
"""

from datetime import datetime, timedelta
from typing import Literal

from endstate.api import Db, ToolError, customer_finder, rounded_within, tool

NOW = "2026-01-15T12:00:00"
# the tools' bookkeeping timestamp: a task's reward does not hang on it (core.grading.footprint)
FREE = ("updated_at",)

# Example turns shown to token-level agents before the conversation (few-shot). Small models emit
# well-formed tool calls only after seeing a few. The entities are fictional: no task uses them.
EXAMPLES = [
    {"user": "Hello, I'm sam.reed@example.com and I have a problem with a delivery.",
     "tool": "find_customer", "arguments": {"email": "sam.reed@example.com"},
     "result": {"customer_id": "C0000"}, "reply": "Thanks, I found your account."},
    {"user": "Can you look at ticket T00002?",
     "tool": "get_ticket", "arguments": {"ticket_id": "T00002"},
     "result": {"id": "T00002", "status": "open", "priority": "normal"},
     "reply": "Ticket T00002 is open with normal priority."},
    {"user": "Please note on ticket T00003 that I'll be home all week.",
     "tool": "add_note", "arguments": {"ticket_id": "T00003", "body": "Customer is home all week."},
     "result": {"note_id": "N000001"}, "reply": "I've added that note to ticket T00003."},
]
AUTHOR = "assistant"  # ticket_notes.author for notes written through these tools
CREDIT_CEILING = 200.0  # the billing system's hard limit; policy caps are lower, per tier
REOPEN_DAYS = 30

Priority = Literal["low", "normal", "high", "urgent"]


def _ticket(db: Db, ticket_id: str, open_only: bool = False) -> dict:
    ticket = db.get("tickets", ticket_id, "ticket")
    if open_only and ticket["status"] == "resolved":
        raise ToolError(f"ticket {ticket_id} is resolved; reopen it first (update_ticket_status)")
    return ticket


def _touch(db: Db, ticket_id: str, **columns) -> None:
    sets = ", ".join(f"{c} = ?" for c in columns)
    db.run(f"UPDATE tickets SET {sets}, updated_at = ? WHERE id = ?", *columns.values(), db.now,
           ticket_id)


def _shipment_details(db: Db, shipment: dict) -> dict:
    shipment["exceptions"] = db.all(
        "SELECT * FROM carrier_exceptions WHERE shipment_id = ? ORDER BY opened_at", shipment["id"])
    for exc in shipment["exceptions"]:
        exc["claims"] = db.all("SELECT id, amount, status, filed_at, decided_at FROM claims "
                               "WHERE exception_id = ? ORDER BY id", exc["id"])
    return shipment


find_customer = customer_finder("Ava Chen")


@tool
def get_customer(db: Db, customer_id: str) -> dict:
    """Get a customer's profile (with tier), shipments and credits received.

    Args:
        customer_id: The customer id, e.g. "C0042".
    """
    customer = db.get("customers", customer_id, "customer")
    customer["shipments"] = db.all(
        "SELECT id, order_ref, carrier, tracking_number, status, shipped_at FROM shipments "
        "WHERE customer_id = ? ORDER BY shipped_at DESC", customer_id)
    customer["credits"] = db.all("SELECT id, ticket_id, amount, reason, issued_at FROM credits "
                                 "WHERE customer_id = ? ORDER BY id", customer_id)
    return customer


@tool
def list_tickets(db: Db, customer_id: str | None = None, status: str | None = None,
                 queue: str | None = None, shipment_id: str | None = None) -> list:
    """Search tickets, newest first (at most 50). Give at least one filter.

    Args:
        customer_id: Only this customer's tickets.
        status: Only tickets with this status (new, open, pending, resolved).
        queue: Only tickets in this queue (general, shipping, billing, returns, escalations).
        shipment_id: Only tickets about this shipment.
    """
    filters = {"customer_id": customer_id, "status": status, "queue": queue,
               "shipment_id": shipment_id}
    used = {k: v for k, v in filters.items() if v}
    if not used:
        raise ToolError("give at least one filter: customer_id, status, queue or shipment_id")
    where = " AND ".join(f"{k} = ?" for k in used)
    return db.all("SELECT id, customer_id, shipment_id, subject, category, priority, status, queue, "
                  f"updated_at FROM tickets WHERE {where} ORDER BY created_at DESC, id DESC LIMIT 50",
                  *used.values())


@tool
def get_ticket(db: Db, ticket_id: str) -> dict:
    """Get a ticket with its notes, credits, escalations, and its shipment's carrier exceptions and
    claims.

    Args:
        ticket_id: The ticket id, e.g. "T00042".
    """
    ticket = _ticket(db, ticket_id)
    ticket["notes"] = db.all("SELECT id, author, visibility, body, created_at FROM ticket_notes "
                             "WHERE ticket_id = ? ORDER BY id", ticket_id)
    ticket["credits"] = db.all("SELECT id, amount, reason, issued_at FROM credits "
                               "WHERE ticket_id = ? ORDER BY id", ticket_id)
    ticket["escalations"] = db.all("SELECT id, reason, created_at FROM escalations "
                                   "WHERE ticket_id = ? ORDER BY id", ticket_id)
    if ticket["shipment_id"]:
        shipment = db.get("shipments", ticket["shipment_id"], "shipment")
        ticket["shipment"] = _shipment_details(db, shipment)
    return ticket


@tool
def get_shipment(db: Db, shipment_id: str | None = None, tracking_number: str | None = None) -> dict:
    """Get a shipment's tracking status with its carrier exceptions and claims, by id or by
    tracking number.

    Args:
        shipment_id: The shipment id, e.g. "S00042".
        tracking_number: The carrier's tracking number.
    """
    if shipment_id:
        shipment = db.get("shipments", shipment_id, "shipment")
    elif tracking_number:
        shipment = db.one("SELECT * FROM shipments WHERE tracking_number = ?",
                          tracking_number.strip().upper())
        if shipment is None:
            raise ToolError(f"no shipment has tracking number {tracking_number}")
    else:
        raise ToolError("give a shipment_id or a tracking_number")
    return _shipment_details(db, shipment)


@tool(writes=True)
def add_note(db: Db, ticket_id: str, body: str,
             visibility: Literal["internal", "customer"] = "internal") -> dict:
    """Add a note to a ticket: internal (staff only) or customer-visible.

    Args:
        ticket_id: The ticket id.
        body: The note's text.
        visibility: "internal" for staff, "customer" to show it to the customer.
    """
    _ticket(db, ticket_id)
    if not body.strip():
        raise ToolError("the note is empty")
    note_id = db.next_id("ticket_notes", "N", 6)
    db.run("INSERT INTO ticket_notes VALUES (?, ?, ?, ?, ?, ?)", note_id, ticket_id, AUTHOR,
           visibility, body.strip(), db.now)
    return {"note_id": note_id, "ticket_id": ticket_id, "visibility": visibility}


@tool(writes=True)
def set_priority(db: Db, ticket_id: str, priority: Priority) -> dict:
    """Set an unresolved ticket's priority.

    Args:
        ticket_id: The ticket id.
        priority: low, normal, high or urgent.
    """
    ticket = _ticket(db, ticket_id, open_only=True)
    if ticket["priority"] == priority:
        raise ToolError(f"ticket {ticket_id} is already {priority}")
    _touch(db, ticket_id, priority=priority)
    return {"ticket_id": ticket_id, "priority": priority}


@tool(writes=True)
def route_ticket(db: Db, ticket_id: str,
                 queue: Literal["general", "shipping", "billing", "returns"]) -> dict:
    """Move an unresolved ticket to another team's queue; it waits there for a new assignee.
    To hand a case to a senior human agent use escalate_ticket instead.

    Args:
        ticket_id: The ticket id.
        queue: general, shipping, billing or returns.
    """
    ticket = _ticket(db, ticket_id, open_only=True)
    if ticket["queue"] == queue:
        raise ToolError(f"ticket {ticket_id} is already in the {queue} queue")
    _touch(db, ticket_id, queue=queue, assignee=None)
    return {"ticket_id": ticket_id, "queue": queue}


@tool(writes=True)
def escalate_ticket(db: Db, ticket_id: str, reason: str) -> dict:
    """Hand an unresolved ticket to the escalations team (senior human agents), saying why.

    Args:
        ticket_id: The ticket id.
        reason: What the customer wants and why you cannot do it yourself.
    """
    ticket = _ticket(db, ticket_id, open_only=True)
    if ticket["queue"] == "escalations":
        raise ToolError(f"ticket {ticket_id} is already with the escalations team")
    escalation_id = db.next_id("escalations", "E", 5)
    db.run("INSERT INTO escalations VALUES (?, ?, ?, ?)", escalation_id, ticket_id, reason.strip(),
           db.now)
    _touch(db, ticket_id, queue="escalations", assignee=None)
    return {"escalation_id": escalation_id, "message": "A senior agent will follow up."}


@tool(writes=True)
def update_ticket_status(db: Db, ticket_id: str, status: Literal["open", "pending"]) -> dict:
    """Set a ticket to open (being worked) or pending (waiting on the customer or the carrier).
    On a resolved ticket this reopens it (allowed within 30 days of resolution).

    Args:
        ticket_id: The ticket id.
        status: "open" or "pending".
    """
    ticket = _ticket(db, ticket_id)
    if ticket["status"] == status:
        raise ToolError(f"ticket {ticket_id} is already {status}")
    if ticket["status"] == "resolved":
        resolved = datetime.fromisoformat(ticket["resolved_at"])
        if datetime.fromisoformat(db.now) - resolved > timedelta(days=REOPEN_DAYS):
            raise ToolError(f"ticket {ticket_id} was resolved on {ticket['resolved_at'][:10]}, more "
                            f"than {REOPEN_DAYS} days ago; it cannot be reopened")
        _touch(db, ticket_id, status=status, resolved_at=None, resolution=None)
    else:
        _touch(db, ticket_id, status=status)
    return {"ticket_id": ticket_id, "status": status}


@tool(writes=True)
def resolve_ticket(db: Db, ticket_id: str, resolution: str) -> dict:
    """Resolve (close) a ticket with a short summary of how it was resolved.

    Args:
        ticket_id: The ticket id.
        resolution: How the customer's issue was resolved.
    """
    _ticket(db, ticket_id, open_only=True)
    if not resolution.strip():
        raise ToolError("say how the ticket was resolved")
    _touch(db, ticket_id, status="resolved", resolved_at=db.now, resolution=resolution.strip())
    return {"ticket_id": ticket_id, "status": "resolved"}


@tool(writes=True)
def open_carrier_exception(db: Db, shipment_id: str,
                           kind: Literal["lost", "damaged", "delayed", "address_issue"]) -> dict:
    """Report a problem with a shipment to its carrier: lost, damaged, delayed or address_issue.
    Damaged applies to delivered shipments; the other kinds to shipments not yet delivered.

    Args:
        shipment_id: The shipment id.
        kind: What went wrong.
    """
    shipment = db.get("shipments", shipment_id, "shipment")
    current = db.one("SELECT id, kind FROM carrier_exceptions WHERE shipment_id = ? AND status = 'open'",
                     shipment_id)
    if current:
        raise ToolError(f"shipment {shipment_id} already has open exception {current['id']} "
                        f"({current['kind']})")
    delivered = shipment["status"] == "delivered"
    if kind == "damaged" and not delivered:
        raise ToolError(f"shipment {shipment_id} is {shipment['status']}; damage can only be "
                        "reported after delivery")
    if kind != "damaged" and shipment["status"] not in ("in_transit", "out_for_delivery"):
        raise ToolError(f"shipment {shipment_id} is {shipment['status']}; {kind} can only be "
                        "reported for a shipment in transit")
    exception_id = db.next_id("carrier_exceptions", "X", 5)
    db.run("INSERT INTO carrier_exceptions VALUES (?, ?, ?, 'open', 'support', ?, NULL, NULL)",
           exception_id, shipment_id, kind, db.now)
    return {"exception_id": exception_id, "shipment_id": shipment_id, "kind": kind,
            "status": "open"}


@tool(writes=True)
def file_carrier_claim(db: Db, exception_id: str, amount: float) -> dict:
    """File a claim with the carrier for a lost or damaged shipment, for at most its declared value.

    Args:
        exception_id: The open carrier exception the claim is for, e.g. "X00042".
        amount: The amount claimed, in dollars.
    """
    exc = db.get("carrier_exceptions", exception_id, "carrier exception")
    if exc["kind"] not in ("lost", "damaged"):
        raise ToolError(f"exception {exception_id} is {exc['kind']}; claims are for lost or damaged "
                        "shipments only")
    if exc["status"] != "open":
        raise ToolError(f"exception {exception_id} is already resolved")
    declared = db.get("shipments", exc["shipment_id"], "shipment")["declared_value"]
    amount = rounded_within(amount, 0.01, declared, "the amount",
                            f"must be more than 0 and at most the declared value, {declared:.2f}")
    claim_id = db.next_id("claims", "CL", 5)
    db.run("INSERT INTO claims VALUES (?, ?, ?, 'filed', ?, NULL)", claim_id, exception_id,
           amount, db.now)
    return {"claim_id": claim_id, "exception_id": exception_id, "amount": amount,
            "status": "filed"}


@tool(writes=True)
def resolve_carrier_exception(db: Db, exception_id: str,
                              resolution: Literal["delivered", "reshipped", "withdrawn"]) -> dict:
    """Mark an open carrier exception resolved: the package was delivered after all (tracking must
    show it delivered), a replacement was shipped, or the customer withdrew the report.

    Args:
        exception_id: The exception id.
        resolution: delivered, reshipped or withdrawn.
    """
    exc = db.get("carrier_exceptions", exception_id, "carrier exception")
    if exc["status"] != "open":
        raise ToolError(f"exception {exception_id} is already resolved")
    shipment = db.get("shipments", exc["shipment_id"], "shipment")
    if resolution == "delivered" and shipment["status"] != "delivered":
        raise ToolError(f"tracking shows shipment {shipment['id']} as {shipment['status']}, "
                        "not delivered")
    db.run("UPDATE carrier_exceptions SET status = 'resolved', resolved_at = ?, resolution = ? "
           "WHERE id = ?", db.now, resolution, exception_id)
    return {"exception_id": exception_id, "status": "resolved", "resolution": resolution}


@tool(writes=True)
def issue_credit(db: Db, ticket_id: str, amount: float,
                 reason: Literal["delay", "damage", "loss", "goodwill"]) -> dict:
    """Give the ticket's customer a store credit (at most $200 at a time).

    Args:
        ticket_id: The ticket the credit is for.
        amount: The credit in dollars.
        reason: delay, damage, loss or goodwill.
    """
    ticket = _ticket(db, ticket_id)
    amount = rounded_within(amount, 0.01, CREDIT_CEILING, "a credit",
                            f"must be more than 0 and at most {CREDIT_CEILING:.2f}")
    credit_id = db.next_id("credits", "CR", 5)
    db.run("INSERT INTO credits VALUES (?, ?, ?, ?, ?, ?)", credit_id, ticket["customer_id"],
           ticket_id, amount, reason, db.now)
    return {"credit_id": credit_id, "customer_id": ticket["customer_id"], "amount": amount}
