"""The buttons domain: one tool. A test domain for grpo's learning test (short prompts, one
decision: press the button the user names)."""

from typing import Literal

from endstate.api import Db, tool


@tool(writes=True)
def press(db: Db, button: Literal["red", "blue"]) -> dict:
    """Press a button.

    Args:
        button: Which button.
    """
    db.run("UPDATE buttons SET pressed = 1 WHERE name = ?", button)
    return {"pressed": button}
