"""What the bank's tool modules (tools.py and app.py) share: a card that can still be changed,
and the limits the system itself enforces."""

from endstate.api import Db, ToolError

SYSTEM_MAX_SPENDING_LIMIT = 25000.0


def open_card(db: Db, card_id: str) -> dict:
    card = db.get("cards", card_id, "card")
    if card["status"] == "cancelled":
        raise ToolError(f"card {card_id} is cancelled; use its replacement card")
    return card

