"""The OpenAI-compatible wire: one or more endpoints, retries with backoff, and the checks that
turn an answer breaking the contract into that episode's `protocol` failure.

Endpoint failures (timeouts, 5xx, connection resets, rate limits) are retried with bounded
exponential backoff; after the bound the caller gets EndpointFailure and the episode becomes
`system_error`, never reward 0. Other 4xx answers stop the run (core.http.configuration_error).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass
from typing import Any

import orjson

from endstate.core.errors import EndstateError
from endstate.core.records.structs import Usage
from endstate.core.wire.http import (
    HttpClient,
    ProtocolError,
    configuration_error,
    http_failure_kind,
)


class EndpointFailure(Exception):
    def __init__(self, kind: str, message: str, attempts: int):
        super().__init__(message)
        self.kind, self.message, self.attempts = kind, message, attempts


class ContextOverflow(Exception):
    """The next prompt would not fit: the episode ends, nothing is truncated."""


@dataclass
class RetryPolicy:
    attempts: int = 4  # calls in all, first included
    base_delay: float = 0.5
    max_delay: float = 8.0


class EndpointError(Exception):
    """An endpoint answered with an HTTP error status."""

    def __init__(self, url: str, status: int, body: bytes):
        text = body[:300].decode(errors="replace").strip()
        super().__init__(f"POST {url}: HTTP {status}: {text}")
        self.status = status


def protocol_failure(message: str) -> EndpointFailure:
    """An answer that breaks the OpenAI contract: that episode's system_error, never the run's end."""
    return EndpointFailure("protocol", message, 1)


def failure_kind(error: BaseException) -> str | None:
    """How an endpoint error is named in `error.kind`, or None when retrying cannot help."""
    if isinstance(error, EndpointError):
        return http_failure_kind(error.status)
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, OSError):
        return "connection"  # refused, reset, closed mid-answer, unreachable, TLS
    return None


def without_nulls(body: dict[str, Any]) -> dict[str, Any]:
    """A request body with its top-level nulls left out: the server's default (`--seed none`)."""
    return {k: v for k, v in body.items() if v is not None}


CHECK_TIMEOUT_S = 30.0  # a start-up check (/v1/models, /tokenize) answers at once or not at all


class Endpoints:
    """One or more OpenAI-compatible base URLs; calls rotate over them, retries move on.

    The wire protocol is the OpenAI REST API (POST JSON, Bearer key), spoken through a lean
    keep-alive client (core/wire/http.py) with orjson bodies: the openai SDK's client costs ~1-3 ms of
    CPU a call (request models, httpx, typed responses) and aiohttp ~0.2 ms, which at hundreds of
    episodes in flight adds up to more than the model's latency (bench/bench_rollout.py); this
    path costs ~0.06 ms. Answers are plain dicts.
    """

    def __init__(self, base_urls: list[str], api_key: str | None, timeout: float, retry: RetryPolicy):
        self.urls = [u.rstrip("/") for u in base_urls]
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self._key = api_key or None  # only in the header: never in a message (see `redacted`)
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.retry = retry
        self.retries = 0  # across the run, for the logs
        self._next = itertools.count()
        self._http: HttpClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> HttpClient:
        """This event loop's client (asyncio.run makes a new loop each time, e.g. per grpo step)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = HttpClient(self.timeout), loop
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        self._http = self._loop = None

    @property
    def keyed(self) -> bool:
        """Whether requests carry an API key."""
        return self._key is not None

    def at(self, url: str, timeout: float | None = None) -> Endpoints:
        """These endpoints' key and retries for one of their URLs alone (a start-up check asks
        each), with at most `timeout` seconds a call."""
        one = Endpoints([url], self._key, min(self.timeout, timeout or self.timeout), self.retry)
        return one

    def redacted(self, text: str) -> str:
        """`text` (an endpoint's words, on their way to a message, a log or a record) without the
        API key: a server may echo the request's headers back."""
        return text.replace(self._key, "<api key>") if self._key and self._key in text else text

    async def post(self, path: str, body: dict[str, Any] | bytes) -> dict[str, Any]:
        """POST `body` as JSON to `path` (e.g. "/chat/completions"): the decoded JSON answer.
        Top-level keys set to None are left out (the server's default; `--seed none`); bytes are
        sent as they are (a body its caller encoded).
        Retries what retrying can help (timeouts, resets, 5xx, 429) with jittered exponential
        backoff; past the bound, EndpointFailure. Other HTTP errors stop the run: they mean the
        request or its configuration is wrong (URL, key, model name)."""
        content = body if isinstance(body, bytes) else orjson.dumps(without_nulls(body))
        start = next(self._next)
        for attempt in range(self.retry.attempts):
            url = self.urls[(start + attempt) % len(self.urls)] + path
            try:
                status, data = await self._client().post(url, content, self.headers)
                if status >= 400:
                    raise EndpointError(url, status, self.redacted(data.decode(errors="replace")).encode())
                answer = orjson.loads(data)
            except (orjson.JSONDecodeError, ProtocolError) as e:
                raise protocol_failure(f"POST {url}: the answer is not JSON over HTTP ({e})") from e
            except Exception as e:  # classified below: retried, stopped on, or raised
                kind = failure_kind(e)
                if kind is None:
                    text = str(e).lower()
                    if "context" in text and "length" in text:
                        raise ContextOverflow(str(e)) from e
                    if isinstance(e, EndpointError):
                        raise configuration_error(str(e)) from e
                    raise
                if attempt + 1 == self.retry.attempts:
                    raise EndpointFailure(kind, f"{type(e).__name__}: {e}", attempt + 1) from e
                self.retries += 1
                delay = min(self.retry.max_delay, self.retry.base_delay * 2 ** attempt)
                await asyncio.sleep(delay * (0.5 + random.random() / 2))  # jittered backoff
                continue
            if not isinstance(answer, dict):
                raise protocol_failure(f"POST {url}: the answer is JSON but not an object")
            return answer
        raise EndstateError(f"--retries {self.retry.attempts}: at least one call is needed")

    async def ask(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int | None, Any, str]:
        """One call to the absolute `url`, not retried and never raising: (HTTP status or None, the
        JSON answer or None, what went wrong or ""). For start-up checks, where a server that
        cannot answer is a warning (the episodes will find out), not the end of the run. It waits
        CHECK_TIMEOUT_S at most: --timeout follows --max-new-tokens (2,048 s for 8,192 tokens)."""
        limit = min(self.timeout, CHECK_TIMEOUT_S)
        try:
            status, data = await asyncio.wait_for(self._client().request(
                method, url, orjson.dumps(body) if body is not None else b"", self.headers), limit)
        except TimeoutError:
            return None, None, f"TimeoutError: no answer within {limit:g} s"
        except Exception as e:  # noqa: BLE001 - reported to the caller, who warns
            return None, None, f"{type(e).__name__}: {e}"
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            answer = None
        problem = f"HTTP {status}: {self.redacted(data.decode(errors='replace'))[:200].strip()}" \
            if status >= 400 else ""
        return status, answer, problem


def server_root(base_url: str) -> str:
    """The server's root for a `.../v1` base URL: vLLM serves /tokenize there, beside /v1."""
    return base_url.removesuffix("/v1")


MAX_TOKENS = 10 ** 12  # per call: past any real answer, far from overflowing a 64-bit sum


def usage_of(response: dict[str, Any]) -> Usage:
    """Token counts of an OpenAI-style response (0 where the server reports none). A count that is
    not a non-negative integer is a protocol failure: priced and summed later, it must be true."""
    usage = response.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise protocol_failure(f"usage is {shown(usage)}, not an object")
    counts = {}
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is not None and (type(value) is not int or not 0 <= value <= MAX_TOKENS):
            raise protocol_failure(f"usage.{key} is {shown(value)}, not a token count")
        counts[key] = value or 0
    return Usage(**counts)


def shown(value: Any, limit: int = 120) -> str:
    """A value from an answer, for a message: JSON, cut to `limit` characters."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def chat_message(response: dict[str, Any]) -> dict[str, Any]:
    """`choices[0].message` of a chat completion, checked: an object whose content is text or null
    and whose tool_calls, if any, are a list."""
    choices = response.get("choices")
    message = choices[0].get("message") if (isinstance(choices, list) and choices
                                            and isinstance(choices[0], dict)) else None
    if not isinstance(message, dict):
        raise protocol_failure(f"no choices[0].message object in the chat completion: {shown(response, 200)}")
    if not isinstance(message.get("content"), (str, type(None))):
        raise protocol_failure(f"choices[0].message.content is {shown(message['content'])}, not text")
    if not isinstance(message.get("tool_calls"), (list, type(None))):
        raise protocol_failure(f"choices[0].message.tool_calls is {shown(message['tool_calls'])}, not a list")
    return message
