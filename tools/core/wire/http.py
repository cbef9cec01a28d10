"""POST JSON over HTTP/1.1 keep-alive connections: the one request OpenAI-compatible endpoints
need, at about a third of a general client's CPU (and a GET, for start-up checks).

With hundreds of episodes in flight, every model call's client CPU lands between a response and
the next request, so it is paid in wall time (bench/bench_rollout.py). aiohttp spent ~190 µs of
CPU per call in Python request/response machinery; this client spends ~60 µs: asyncio transports
carry the bytes (TLS included), httptools (llhttp, the parser aiohttp and uvicorn use) parses the
answers, content-length or chunked. Left out on purpose: redirects, cookies and compression (we
ask for identity; gzip is decoded if a server sends it anyway).

Proxies are honoured as the openai SDK (httpx) honours them, from HTTPS_PROXY, HTTP_PROXY,
ALL_PROXY and NO_PROXY (either case; core.wire.proxy): an https endpoint is reached through a
CONNECT tunnel, TLS end to end with the endpoint; an http one by sending the request to the proxy
with the absolute URL. The proxy is chosen once per origin, when its first connection opens, so
the per-call path is the same with or without one.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import httptools

from endstate.core.errors import ConfigurationError
from endstate.core.wire import proxy as proxies


def http_failure_kind(status: int) -> str | None:
    """How an HTTP error status is named in `error.kind` when retrying may help, else None: the
    request or its configuration is wrong (URL, key, model name), and the run stops with the
    endpoint's words. One rule for every endpoint: agent, simulated user and judge."""
    return ("rate_limit" if status == 429 else "timeout" if status == 408
            else "http_5xx" if status >= 500 else None)


def configuration_error(what: str) -> ConfigurationError:
    return ConfigurationError(f"{what} (not retried: fix the URL, key, model name or request)")


class ServerDisconnected(ConnectionError):
    """The connection closed before the whole answer arrived."""


class ProtocolError(Exception):
    """The answer is not HTTP/1.1 we can read."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


@lru_cache(maxsize=256)
def target(url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r}: endpoints are http:// or https:// URLs")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time. httptools calls the on_* methods."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future | None = None
        self.body: list[bytes] = []
        self.encoding = b""
        self.received = False  # any byte of the current answer
        self.framed = False  # content-length or chunked: else the body ends when the connection does
        self.headers_done = False
        self.open = True
        self.keep_alive = True

    # asyncio
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ProtocolError(f"unreadable HTTP answer: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self.headers_done and not self.framed and exc is None:  # HTTP/1.0 style: the close ends it
            self.keep_alive = False
            self._complete()
        self._fail(ServerDisconnected(f"the server closed the connection before answering{f': {exc}' if exc else ''}"))

    # httptools
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-encoding":
            self.encoding = value.strip().lower()
        elif name in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        self._complete()

    def _complete(self) -> None:
        if self.answer is None or self.answer.done():
            return
        body = b"".join(self.body)
        try:
            if self.encoding in (b"gzip", b"deflate"):
                body = zlib.decompress(body, 47)  # 32 + 15: gzip or zlib header, detected
        except zlib.error as e:
            self._fail(ProtocolError(f"a {self.encoding.decode()} body that does not decode: {e}"))
            return
        self.answer.set_result((self.parser.get_status_code(), body))

    def _fail(self, error: Exception) -> None:
        self.keep_alive = False
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(error)
        if self.transport is not None:
            self.transport.abort()

    def send(self, request: bytes) -> asyncio.Future:
        self.answer = asyncio.get_running_loop().create_future()
        self.body, self.encoding, self.received, self.framed, self.headers_done = [], b"", False, False, False
        self.transport.write(request)
        return self.answer


class HttpClient:
    """Keep-alive connections per origin, for one event loop. Every connection in use serves one
    request; idle ones wait in a pool (no cap: an episode in flight holds at most one)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._tls: ssl.SSLContext | None = None
        self._proxies = proxies.from_environment()  # None: no proxy variable set
        self._routes: dict[tuple[str, str, int], proxies.Proxy | None] = {}  # with proxies: per origin
        self._forwarded: dict[tuple[str, str, int], bytes] = {}  # http origins a proxy forwards

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """(status, body) of one POST. Raises TimeoutError past the timeout, ConnectionError when
        the connection fails, ProtocolError for an answer that is not HTTP."""
        return await self.request("POST", url, body, headers)

    async def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """(status, body) of one request (GET or POST), as `post`."""
        t = target(url)
        if self._proxies is not None and t.origin not in self._routes:
            self._route(t)
        if self._forwarded and t.origin in self._forwarded:  # an http origin behind a proxy
            request = _forwarded_head(method, t, tuple(headers.items()), len(body),
                                      self._forwarded[t.origin]) + body
        else:
            request = _head(method, t, tuple(headers.items()), len(body)) + body
        idle = self._idle.setdefault(t.origin, [])
        while idle:
            conn = idle.pop()
            if not conn.open:
                continue
            try:
                return await self._exchange(conn, request, idle)
            except ServerDisconnected:
                if conn.received:  # it had begun to answer: the caller's retry policy decides
                    raise
                break  # closed by the server while idle: one more try, on a new connection
        return await self._exchange(await self._connect(t), request, idle)

    def _route(self, t: Target) -> None:
        """The proxy `t`'s origin goes through, if any (once per origin: NO_PROXY matched once)."""
        via = self._routes[t.origin] = proxies.route(self._proxies, t.scheme, t.host, t.port)
        if via is not None and t.scheme == "http":
            self._forwarded[t.origin] = via.authorization

    async def _connect(self, t: Target) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = None
        if t.scheme == "https":
            self._tls = self._tls or ssl.create_default_context()
            tls = self._tls
        via = self._routes.get(t.origin)
        async with asyncio.timeout(self.timeout):  # not wait_for: that costs a task per connection
            if via is None:
                _, conn = await loop.create_connection(_Connection, t.host, t.port, ssl=tls)
            elif tls is None:  # http: the proxy takes the absolute URL (_forwarded_head)
                _, conn = await loop.create_connection(_Connection, via.host, via.port)
            else:
                conn = await proxies.tunnel(loop, via, t.host, t.port, tls, _Connection)
        return conn

    async def _exchange(self, conn: _Connection, request: bytes, idle: list[_Connection]) -> tuple[int, bytes]:
        answer = conn.send(request)
        # A timer, not wait_for: no task per request.
        expired = asyncio.get_running_loop().call_later(
            self.timeout, conn._fail, TimeoutError(f"no answer within {self.timeout:g} s"))
        try:
            result = await answer
        except BaseException:  # failed, timed out or cancelled: the connection is in no known state
            conn.transport.abort()
            raise
        finally:
            expired.cancel()
        if conn.keep_alive and conn.open:
            idle.append(conn)
        else:
            conn.transport.close()
        return result

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.transport.close()
        self._idle.clear()


@lru_cache(maxsize=256)
def _head_prefix(method: str, t: Target, headers: tuple[tuple[str, str], ...]) -> bytes:
    host = f"[{t.host}]" if ":" in t.host else t.host  # an IPv6 literal
    host = host if t.port == {"http": 80, "https": 443}[t.scheme] else f"{host}:{t.port}"
    lines = [f"{method} {t.path} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity",
             *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


def _head(method: str, t: Target, headers: tuple[tuple[str, str], ...], length: int) -> bytes:
    return _head_prefix(method, t, headers) + b"%d\r\n\r\n" % length


@lru_cache(maxsize=256)
def _forwarded_prefix(method: str, t: Target, headers: tuple[tuple[str, str], ...],
                      authorization: bytes) -> bytes:
    """The head of a request an http proxy forwards: the absolute URL, and its credentials."""
    origin = _head_prefix(method, t, headers).split(b" ", 2)
    host = f"[{t.host}]" if ":" in t.host else t.host
    absolute = f"http://{host}:{t.port}".encode() + origin[1]
    return b" ".join([origin[0], absolute, origin[2]]).replace(
        b"\r\nHost:", authorization + b"\r\nHost:", 1)


def _forwarded_head(method: str, t: Target, headers: tuple[tuple[str, str], ...], length: int,
                    authorization: bytes) -> bytes:
    return _forwarded_prefix(method, t, headers, authorization) + b"%d\r\n\r\n" % length
