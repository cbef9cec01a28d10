"""Counter tools."""

from endstate.api import Db, ToolError, tool

RESULTS = "plain"  # the plugin's own tool result format


@tool
def get_counter(db: Db, counter_id: str) -> dict:
    """Read a counter.

    Args:
        counter_id: The counter's id, such as "C1".
    """
    return db.get("counters", counter_id, "counter")


@tool(writes=True)
def add(db: Db, counter_id: str, amount: int) -> dict:
    """Add a positive amount to a counter.

    Args:
        counter_id: The counter's id, such as "C1".
        amount: How much to add (at least 1).
    """
    if amount < 1:
        raise ToolError("amount must be at least 1")
    counter = db.get("counters", counter_id, "counter")
    db.run("UPDATE counters SET value = ? WHERE id = ?", counter["value"] + amount, counter_id)
    return {"id": counter_id, "value": counter["value"] + amount}
