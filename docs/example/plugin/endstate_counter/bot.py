"""The `counter-bot` agent backend: no model. It reads "add N to counter ID" from the user's
opening, calls the add tool once, then says it is done. Like every session, it learns of the
conversation only through `observe`."""

import re

from endstate.api import Backend, Parsed, ToolCall, Turn, Usage, UserMessage

ASKED = re.compile(r"add (\d+) to counter (\w+)", re.IGNORECASE)


class Session:
    def __init__(self, system: str):
        self.system = system  # what the agent is told: the domain's policy
        self.asked: re.Match | None = None
        self.called = False

    def observe(self, new: list) -> None:
        for message in new:
            if isinstance(message, UserMessage) and self.asked is None:
                self.asked = ASKED.search(message.content)

    async def act(self) -> Turn:
        if self.asked and not self.called:
            self.called = True
            amount, counter = self.asked.groups()
            call = ToolCall.of("add", {"counter_id": counter, "amount": int(amount)})
            return Turn(Parsed("", tool_calls=[call]), None, Usage())
        return Turn(Parsed("Done."), "Done.", Usage())


class CounterBot:
    def open(self, domain, tool_specs: list) -> Session:
        return Session(domain.policy)

    def close(self) -> None:
        """Nothing to close: no endpoint."""


BACKEND = Backend(lambda config, live=None: CounterBot(), "reads the opening, calls add once",
                  endpoint=False)
