"""The `polite` simulated user: it thanks the agent once, then ends the conversation."""

from endstate.api import STOP, Usage, UserKind


class Polite:
    def __init__(self):
        self.usage = Usage()  # no model: no tokens
        self.thanked = False

    async def reply(self, transcript: list) -> str:
        if self.thanked:
            return STOP
        self.thanked = True
        return "Thank you!"

    def close(self) -> None:
        """Nothing to close."""


KIND = UserKind(lambda task, endpoint: Polite(), "thanks the agent once, then stops")
