"""Proxies from the environment, as the openai SDK (httpx) reads them: HTTPS_PROXY for https
endpoints, HTTP_PROXY for http ones, ALL_PROXY for either, NO_PROXY for the hosts reached
directly (a host, a domain and its subdomains, host:port, `*`); lower case wins over upper case,
as in urllib. Only http:// proxies are spoken to: an https endpoint goes through a CONNECT tunnel
(TLS runs end to end with the endpoint; the proxy sees the host and port, never the request),
an http one is sent to the proxy with its absolute URL. Credentials in the proxy's URL
(http://user:password@proxy:3128) go in Proxy-Authorization."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from endstate.core.errors import ConfigurationError

VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
MAX_ANSWER = 16384  # bytes of a proxy's answer to CONNECT, head included


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    url: str  # without its credentials: for messages
    authorization: bytes  # b"\r\nProxy-Authorization: Basic ..." or b""


def from_environment() -> dict[str, str] | None:
    """{scheme: proxy URL, "no": NO_PROXY} from the environment; None when no proxy is set (the
    usual case costs a few dict lookups, and urllib.request is never imported)."""
    if not any(os.environ.get(v) for v in VARIABLES):
        return None
    from urllib.request import getproxies_environment

    return getproxies_environment()


def route(found: dict[str, str], scheme: str, host: str, port: int) -> Proxy | None:
    """The proxy an endpoint of `scheme`, `host` and `port` is reached through, or None."""
    from urllib.request import proxy_bypass_environment

    url = found.get(scheme) or found.get("all")
    if not url or proxy_bypass_environment(f"{host}:{port}", found):
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")  # "proxy:3128" is http, as in httpx
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigurationError(f"proxy {parts.scheme}://{parts.hostname}: only http:// proxies are "
                                 "supported (an https endpoint is tunnelled through one with "
                                 "CONNECT); set HTTPS_PROXY=http://HOST:PORT, or NO_PROXY for this host")
    authorization = b""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = b"\r\nProxy-Authorization: Basic " + base64.b64encode(pair)
    where = f"http://{parts.hostname}:{parts.port or 80}"
    return Proxy(parts.hostname, parts.port or 80, where, authorization)


class _Answer(asyncio.Protocol):
    """Reads a proxy's answer to CONNECT: its status, once the head has arrived."""

    def __init__(self) -> None:
        self.head = b""
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.head += data
        if (b"\r\n\r\n" in self.head or len(self.head) > MAX_ANSWER) and not self.done.done():
            self.done.set_result(self.head)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"the proxy closed the connection ({exc or 'no answer'})"))


async def tunnel(loop: asyncio.AbstractEventLoop, via: Proxy, host: str, port: int,
                 tls: ssl.SSLContext, make: Callable[[], asyncio.Protocol]) -> asyncio.Protocol:
    """A protocol `make()` speaking TLS to host:port through a CONNECT tunnel of the proxy `via`.
    A proxy refusing the tunnel with 407 or 403 is a configuration error (its credentials or its
    rules: retrying cannot help); any other refusal a connection error (retried)."""
    answer = _Answer()
    transport, _ = await loop.create_connection(lambda: answer, via.host, via.port)
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        transport.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}".encode()
                        + via.authorization + b"\r\n\r\n")
        head = await answer.done
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if status in (407, 403):
            raise ConfigurationError(f"the proxy {via.url} refused CONNECT {authority}: {status_line} "
                                     "(check the proxy's credentials in HTTPS_PROXY, or NO_PROXY)")
        if status != 200:
            raise ConnectionError(f"the proxy {via.url} did not open a tunnel to {authority}: "
                                  f"{status_line or 'no answer'}")
        protocol = make()
        secure = await loop.start_tls(transport, protocol, tls, server_hostname=host)
    except BaseException:
        transport.abort()
        raise
    protocol.connection_made(secure)  # start_tls does not call it
    return protocol
