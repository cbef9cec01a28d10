"""Library tools. The signature and docstring of each are what the agent sees.

The tools enforce the hard rules (a copy must be free, a loan can be returned once). The fines rule
lives only in policy.md: checkout_book does not look at fines, so lending to a member who owes
more than $10.00 is possible, and forbidden. That is the policy trap the tasks check.
"""

from datetime import datetime, timedelta

from endstate.api import Db, ToolError, tool

NOW = "2026-01-15T12:00:00"  # the domain's clock: db.now in every tool
LOAN_DAYS = 21
FINE_PER_DAY = 0.25


def _next_loan_id(db: Db) -> str:
    """Sequential ids, never random ones: replaying the same calls must give the same rows."""
    last = db.value("SELECT id FROM loans ORDER BY id DESC LIMIT 1")
    return f"L{int(last[1:]) + 1 if last else 1:05d}"


@tool
def find_member(db: Db, email: str) -> dict:
    """Look up a member by email: their id, name, unpaid fines and the books they have out.

    Args:
        email: The member's email address.
    """
    member = db.one("SELECT * FROM members WHERE email = ?", email.strip().lower())
    if member is None:
        raise ToolError(f"no member with email {email}")
    member["loans"] = db.all("SELECT l.id, l.book_id, b.title, l.due_at FROM loans l JOIN books b "
                             "ON b.id = l.book_id WHERE l.member_id = ? AND l.returned_at IS NULL "
                             "ORDER BY l.id", member["id"])
    return member


@tool
def search_books(db: Db, title: str) -> list[dict]:
    """Find books whose title contains the given words, with the number of copies on the shelf.

    Args:
        title: Part of the title, e.g. "winter garden".
    """
    return db.all("SELECT b.id, b.title, b.author, max(0, b.copies - (SELECT count(*) FROM loans l "
                  "WHERE l.book_id = b.id AND l.returned_at IS NULL)) AS available FROM books b "
                  "WHERE b.title LIKE ? ORDER BY b.id LIMIT 10", f"%{title.strip()}%")


@tool(writes=True)
def checkout_book(db: Db, member_id: str, book_id: str) -> dict:
    """Lend a book to a member for 21 days.

    Args:
        member_id: The member's id, such as "M0042".
        book_id: The book's id, such as "B0007".
    """
    if db.one("SELECT id FROM members WHERE id = ?", member_id) is None:
        raise ToolError(f"member {member_id} not found")
    book = db.one("SELECT * FROM books WHERE id = ?", book_id)
    if book is None:
        raise ToolError(f"book {book_id} not found")
    out = db.value("SELECT count(*) FROM loans WHERE book_id = ? AND returned_at IS NULL", book_id)
    if out >= book["copies"]:
        raise ToolError(f"no copy of {book['title']!r} is on the shelf")
    loan_id = _next_loan_id(db)
    due = (datetime.fromisoformat(db.now) + timedelta(days=LOAN_DAYS)).isoformat()
    db.run("INSERT INTO loans VALUES (?, ?, ?, ?, ?, NULL)", loan_id, member_id, book_id, db.now, due)
    return {"loan_id": loan_id, "due_at": due}


@tool(writes=True)
def return_book(db: Db, loan_id: str) -> dict:
    """Check a returned book back in. A late return adds $0.25 per day late to the member's fines.

    Args:
        loan_id: The loan id, such as "L00123".
    """
    loan = db.one("SELECT * FROM loans WHERE id = ?", loan_id)
    if loan is None:
        raise ToolError(f"loan {loan_id} not found")
    if loan["returned_at"] is not None:
        raise ToolError(f"loan {loan_id} was already returned on {loan['returned_at']}")
    days_late = max(0, (datetime.fromisoformat(db.now) - datetime.fromisoformat(loan["due_at"])).days)
    db.run("UPDATE loans SET returned_at = ? WHERE id = ?", db.now, loan_id)
    if days_late:
        db.run("UPDATE members SET fines = fines + ? WHERE id = ?", days_late * FINE_PER_DAY,
               loan["member_id"])
    return {"loan_id": loan_id, "days_late": days_late, "fine_added": days_late * FINE_PER_DAY}
