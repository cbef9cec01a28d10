"""A test double at the edge we do not own: a local HTTP server that plays an OpenAI-compatible
endpoint (`/v1/chat/completions`, and `/v1/completions` the way vLLM answers with
`return_token_ids`), with scripted answers, a scripted *policy*, a fixed latency and injected faults;
and, when given a tokenizer and served model names, vLLM's start-up surface: `GET /v1/models`
and `POST /tokenize` (at the server root, as vLLM serves it), both 404 otherwise.

It is not a model and not a server to deploy: it exists so tests and bench/ can drive rollout and
probe over real HTTP. Loopback only, bounded: it binds 127.0.0.1, every injected hang is capped at
MAX_HANG_S, idle keep-alive connections are dropped after IDLE_S, and it stops with its `with` block
(or, run as a script for bench/, when its stdin closes).

    with FakeEndpoint(policy=gold_policy(tasks), latency=0.1, faults=first(2, HTTP_503)) as ep:
        probe --backend chat --agent-url {ep.base_url} ...
        len(ep.requests)  # every request, faulted or not, in arrival order
    with FakeEndpoint(completions=..., tokenizer="path/to/tokenizer", served=["qwen"]) as ep:
        ep.checks  # the /v1/models and /tokenize calls, kept apart (faults do not apply to them)
    with FakeEndpoint(policy=..., key="sk-a") as ep:  # 401 for any other bearer token
        ep.authorizations  # the Authorization header of every request, checks included

A tool's preflight request (core.wire.preflight: one token, its own probe prompt) is a start-up
check too, answered and kept apart, unless `preflight_faults=True` makes it a request like any
other (numbered, faulted, in `requests`), for the tests of the preflight itself.

An asyncio server on its own thread (or process): hundreds of concurrent requests cost one
coroutine each, not a thread each, so the double is never the bottleneck of a benchmark.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import orjson
from server_thread import ServerThread

MAX_HANG_S = 10.0  # an injected timeout never holds a connection longer than this
IDLE_S = 30.0  # a keep-alive connection with no request for this long is closed


@dataclass(frozen=True)
class Fault:
    """An injected failure: `http` answers `status`; `timeout` says nothing for `hang_s` (past the
    client's timeout) and then closes; `reset` closes the socket with a TCP RST."""

    kind: str  # "http" | "timeout" | "reset"
    status: int = 500
    hang_s: float = 3.0


HTTP_500, HTTP_503, RESET = Fault("http", 500), Fault("http", 503), Fault("reset")


def hang(seconds: float) -> Fault:
    return Fault("timeout", hang_s=min(seconds, MAX_HANG_S))


@dataclass(frozen=True)
class Raw:
    """A whole answer body, sent as is with status 200: for answers that break the OpenAI contract
    (a null message, usage that is not a count, token ids outside the vocabulary)."""

    payload: Any


# A chat reply: text, tool calls as (name, arguments) pairs, a raw body, or a fault.
ChatReply = Union[str, list[tuple[str, dict[str, Any]]], Raw, Fault]
# A completions reply: generated token ids (logprob -0.5 each), optionally with their text, a raw
# body, or a fault.
CompletionReply = Union[list[int], tuple[list[int], str], Raw, Fault]
Faults = Callable[[int], Union[Fault, None]]  # request number (from 0) -> fault to inject, or None


def first(n: int, fault: Fault) -> Faults:
    """The first `n` requests fail with `fault`; the rest go to the policy."""
    return lambda i: fault if i < n else None


def always(fault: Fault) -> Faults:
    return lambda i: fault


def gold_policy(tasks: Iterable[dict[str, Any]], done: str = "Done.") -> Callable[[dict], ChatReply]:
    """A policy that performs each task's gold steps, one per model call, then says `done`.

    The task is found by its opening message (bench openings are unique); step k is chosen by the
    number of assistant turns since the opening, so the policy is a function of the conversation."""
    by_opening = {t["user"]["opening"]: t["gold"] for t in tasks}

    def policy(body: dict) -> ChatReply:
        messages = body["messages"]
        start = next((i for i, m in enumerate(messages)
                      if m["role"] == "user" and m.get("content") in by_opening), None)
        if start is None:
            return "I cannot tell which task this is."
        gold = by_opening[messages[start]["content"]]
        k = sum(1 for m in messages[start:] if m["role"] == "assistant")
        if k >= len(gold):
            return done
        step = gold[k]
        return step["say"] if "say" in step else [(step["tool"], step["args"])]

    return policy


def _chat_payload(body: dict, reply: str | list[tuple[str, dict[str, Any]]]) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
    if not isinstance(reply, str):
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {
            "name": name, "arguments": orjson.dumps(args).decode()}} for i, (name, args) in enumerate(reply)]
    return {"id": "chatcmpl-double", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101}}


def _completion_payload(body: dict, reply: list[int] | tuple[list[int], str]) -> dict:
    ids, text = (reply, "") if isinstance(reply, list) else reply
    prompt = body.get("prompt")
    prompt_ids = prompt if isinstance(prompt, list) else []
    return {"id": "cmpl-double", "object": "text_completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "text": text, "token_ids": ids, "prompt_token_ids": prompt_ids,
                         "finish_reason": "stop",
                         "logprobs": {"tokens": [f"token_id:{t}" for t in ids],
                                      "token_logprobs": [-0.5] * len(ids),
                                      "top_logprobs": [None] * len(ids),
                                      "text_offset": [0] * len(ids)}}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids),
                      "total_tokens": len(prompt_ids) + len(ids)}}


class FakeEndpoint(ServerThread):
    """`answers` (the old, simplest form) are consumed in order: a string is the assistant's reply,
    an int an HTTP status; when they run out the answer is 500. Or give `policy(body) -> ChatReply`
    and/or `completions(body) -> CompletionReply`. `faults(n)` is asked first for each request."""

    def __init__(self, answers: list[str | int] | None = None, *,
                 policy: Callable[[dict], ChatReply] | None = None,
                 completions: Callable[[dict], CompletionReply] | None = None,
                 latency: float = 0.0, faults: Faults | None = None, port: int = 0,
                 tokenizer: Any = None, served: Iterable[str] | None = None,
                 max_model_len: int = 8192, key: str | None = None, preflight_faults: bool = False,
                 echo_headers: bool = False, tls: Any = None):
        """`tokenizer`: a transformers tokenizer or its folder, for /tokenize; `served`: the model
        names /v1/models lists, each with `max_model_len`; `key`: the only bearer token taken;
        `echo_headers`: an error answer quotes the request's headers back (some servers do);
        `tls`: an ssl.SSLContext to serve https://localhost with (a hosted endpoint's scheme)."""
        if isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        self.tokenizer, self.max_model_len = tokenizer, max_model_len
        self.served = None if served is None else list(served)
        self.checks: list[tuple[str, str, dict]] = []  # (method, path, body) of start-up calls
        self.key, self.preflight_faults, self.echo_headers = key, preflight_faults, echo_headers
        self.tls = tls
        self.authorizations: list[str | None] = []  # every request's Authorization header
        self.answers = list(answers or [])
        self.policy, self.completions = policy, completions
        self.latency, self.faults = latency, faults or (lambda i: None)
        self._bodies: list[bytes] = []  # raw, so hundreds of thousands cost the GC nothing
        self.outcomes: list[str] = []  # per request: "ok", "http 500", "timeout", "reset"
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[dict]:
        """The request bodies, in arrival order (faulted ones too)."""
        return [orjson.loads(b) if b else {} for b in self._bodies]

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}/v1" if self.tls else f"http://127.0.0.1:{self.port}/v1"

    # -- deciding the answer ------------------------------------------------------------------

    def _startup_answer(self, method: str, path: str, data: bytes) -> Fault | dict | None:
        """vLLM's answers to /v1/models and /tokenize (404 when not configured), and a preflight
        request's; None for any other request. Kept out of `requests`, and never faulted, so
        request numbers stay those of the model calls."""
        body = orjson.loads(data) if data else {}
        if self._preflight(method, body) and not self.preflight_faults:
            self.checks.append((method, path, body))
            return (_chat_payload(body, "ready") if path.endswith("/chat/completions")
                    else _completion_payload(body, [0]))
        if (method, path) not in (("GET", "/v1/models"), ("POST", "/tokenize")):
            return None
        self.checks.append((method, path, body))
        if path == "/v1/models":
            if self.served is None:
                return Fault("http", 404)
            return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "double",
                                                "max_model_len": self.max_model_len} for name in self.served]}
        if self.tokenizer is None:
            return Fault("http", 404)
        ids = self.tokenizer(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))["input_ids"]
        answer = {"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids}
        if body.get("return_token_strs"):
            answer["token_strs"] = self.tokenizer.convert_ids_to_tokens(ids)
        return answer

    @staticmethod
    def _preflight(method: str, body: Any) -> bool:
        try:
            from endstate.core.episode.backends import PROBE_IDS
            from endstate.core.wire.preflight import PROBE_MESSAGES
        except ImportError:  # an endstate without a preflight sends no probe
            return False
        return method == "POST" and isinstance(body, dict) and body.get("max_tokens") == 1 and (
            body.get("messages") == PROBE_MESSAGES or body.get("prompt") == PROBE_IDS)

    def _answer(self, path: str, data: bytes) -> Fault | dict:
        n = len(self._bodies)
        self._bodies.append(data)
        body = orjson.loads(data) if data else {}
        fault = self.faults(n)
        if fault is None and self.answers and self.policy is None and path.endswith("/chat/completions"):
            answer = self.answers.pop(0)
            fault = Fault("http", answer) if isinstance(answer, int) else None
            reply: Any = answer
        elif fault is None and path.endswith("/chat/completions"):
            reply = self.policy(body) if self.policy else Fault("http", 500)
            fault = reply if isinstance(reply, Fault) else None
        elif fault is None and path.endswith("/completions") and self.completions:
            reply = self.completions(body)
            fault = reply if isinstance(reply, Fault) else None
        elif fault is None:
            fault = Fault("http", 404 if path.endswith("/completions") else 500)
        if fault is not None:
            self.outcomes.append("http %d" % fault.status if fault.kind == "http" else fault.kind)
            return fault
        self.outcomes.append("ok")
        if isinstance(reply, Raw):
            return reply.payload
        return (_chat_payload if path.endswith("/chat/completions") else _completion_payload)(body, reply)

    # -- HTTP/1.1 with keep-alive, by hand (requests are small and well-formed: ours) ---------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                async with asyncio.timeout(IDLE_S):  # not wait_for: that costs a task per request
                    head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (h.partition(":") for h in header_lines if h)}
                data = await reader.readexactly(int(headers.get("content-length", 0)))
                method, path = request_line.split(" ")[:2]
                self.authorizations.append(headers.get("authorization"))
                if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
                    answer = Fault("http", 401)
                else:
                    answer = self._startup_answer(method, path, data)
                if answer is None:
                    answer = self._answer(path, data)
                if self.latency:
                    await asyncio.sleep(self.latency)
                if isinstance(answer, Fault) and answer.kind == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if isinstance(answer, Fault) and answer.kind == "timeout":
                    await asyncio.sleep(min(answer.hang_s, MAX_HANG_S))
                    writer.close()
                    return
                if isinstance(answer, Fault):
                    said = f"injected fault; request headers: {headers}" if self.echo_headers else "injected fault"
                    status, payload = answer.status, {"error": {"message": said, "type": "server_error"}}
                else:
                    status, payload = 200, answer
                out = orjson.dumps(payload)
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (status, len(out), out))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError,
                asyncio.CancelledError):  # cancelled: the double is stopping
            pass
        finally:
            writer.close()

    # -- lifecycle ----------------------------------------------------------------------------

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self.port, backlog=2048,
                                                  ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]


def main(argv: list[str]) -> None:
    """For bench/: `python tests/openai_double.py LATENCY_S TASKS.jsonl...` serves the gold policy
    of those tasks, prints its base URL, and stops when stdin closes."""
    latency, files = float(argv[0]), argv[1:]
    tasks = [orjson.loads(line) for f in files for line in open(f, "rb") if line.strip()]
    with FakeEndpoint(policy=gold_policy(tasks), latency=latency) as endpoint:
        print(endpoint.base_url, flush=True)
        sys.stdin.read()
        print(f"served {len(endpoint._bodies)} requests", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
