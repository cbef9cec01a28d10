"""What the bank's tool modules (tools.py and app.py) share: the clock, cents, dates, a card
that can still be changed, and the limits the system itself enforces."""

from datetime import date

from endstate.core.env.tools import Db, ToolError

SYSTEM_MAX_SPENDING_LIMIT = 25000.0


def today(db: Db) -> str:
    return db.now[:10]


def cents(amount: float, what: str = "amount") -> float:
    if amount <= 0:
        raise ToolError(f"{what} must be positive")
    return round(amount, 2)


def open_card(db: Db, card_id: str) -> dict:
    card = db.get("cards", card_id, "card")
    if card["status"] == "cancelled":
        raise ToolError(f"card {card_id} is cancelled; use its replacement card")
    return card


def parse_date(text: str, what: str) -> str:
    try:
        return date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise ToolError(f"{what} {text!r} is not a date; use YYYY-MM-DD") from None
