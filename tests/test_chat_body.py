"""The chat backend encodes each message once and sends the bytes of the conversation so far
(agent/chat.py): every request must be exactly the JSON of the whole request, re-encoded from the
transcript, whatever the messages, sampling fields and seed."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from endstate.core.agent.chat import ChatSession, endpoint_view, shot_views
from endstate.core.agent.sampling import Sampling
from endstate.core.agent.session import FewShot
from endstate.core.records.structs import (
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from endstate.core.wire.endpoints import without_nulls

TOOLS = [{"type": "function", "function": {"name": "get_order", "description": "Look an order up.",
                                           "parameters": {"type": "object", "properties": {
                                               "order_id": {"type": "string"}}}}}]


def whole_request(session: ChatSession, transcript: list) -> dict:
    """The reference: the request rebuilt from the whole transcript, as the backend sent it before
    it encoded a message at a time (top-level nulls left out)."""
    return without_nulls({"model": session.model, "messages": [
        endpoint_view(transcript[0]), *session.shots, *map(endpoint_view, transcript[1:])],
        "tools": session.tool_specs or None, **session.sampling.request_fields(), "seed": session.seed})


class Recorder:
    """Stands in for core.wire.endpoints.Endpoints (the HTTP is tested in test_http.py): keeps
    each body it is given and answers with the next scripted chat message."""

    def __init__(self, answers):
        self.bodies, self.answers = [], list(answers)

    async def post(self, path, body):
        self.bodies.append(body)
        return {"choices": [{"message": self.answers.pop(0)}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


@pytest.mark.parametrize("sampling,seed,tools,shots", [
    (Sampling(), 0, TOOLS, []),
    (Sampling(temperature=0.3, top_k=5, stop=["</s>"], extra_body={"chat_template_kwargs": {"x": 1}}),
     None, [], [FewShot("Where is W1?", "get_order", {"order_id": "W1"}, {"status": "sent"}, "Sent.")]),
])
def test_each_request_is_the_json_of_the_whole_conversation(sampling, seed, tools, shots):
    call = {"id": "x", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W\\u00e9\\"1"}'}}
    endpoint = Recorder([{"content": None, "tool_calls": [call]}, {"content": "Done – \u2603 \"ok\"\n"}, {"content": ""}])
    session = ChatSession(endpoint, "m", sampling, seed, tools, "Be kind.\n\u00e9", shot_views(shots))
    transcript = []

    def append(*messages):  # as the episode loop does: the session is told of each message
        transcript.extend(messages)
        session.observe(list(messages))

    append(SystemMessage(session.system), UserMessage("Hi \U0001f600, order W\u00e91?"))
    for n in range(3):
        turn = asyncio.run(session.act())
        assert endpoint.bodies[-1] == orjson.dumps(whole_request(session, transcript))
        said = turn.message(n)
        append(said)
        if said.tool_calls:
            append(ToolMessage(said.tool_calls[0].id, "get_order", '{"status": "sent"}'))
        else:
            append(UserMessage("and the other \\ one?"))
    body = orjson.loads(endpoint.bodies[-1])
    assert [m["role"] for m in body["messages"]] == (
        ["system"] + ["user", "assistant", "tool", "assistant"] * len(shots)
        + ["user", "assistant", "tool", "assistant", "user"])
    assert ("seed" in body) == (seed is not None) and ("tools" in body) == bool(tools)


def test_sessions_of_a_backend_share_its_encoded_opening_and_tail_per_tool_set():
    """ChatBackend.open hands each session the opening (system prompt, few-shot turns) and the tail
    (tools, sampling, seed) it encoded once per domain and per set of allowed tools."""
    from endstate.core.agent.chat import ChatBackend
    from endstate.core.env.domain import Domains

    domain = Domains()["retail"]
    specs = [t.schema for t in domain.tools.values()]
    endpoint = Recorder([{"content": "ok"}] * 3)
    backend = ChatBackend(endpoint, "m", Sampling(top_k=3), seed=7)
    for allowed in (specs, specs[:2], specs):
        session = backend.open(domain, allowed)
        start = [SystemMessage(session.system), UserMessage("Hi")]
        session.observe(start)
        asyncio.run(session.act())
        assert endpoint.bodies[-1] == orjson.dumps(whole_request(session, start))
        assert [t["function"]["name"] for t in orjson.loads(endpoint.bodies[-1])["tools"]] == \
            [s["function"]["name"] for s in allowed]
    assert len(backend._tails) == 2 and len(backend._openings) == 1
