"""A test double of a cluster's egress proxy, at the edge endstate does not own: a forward HTTP
proxy on 127.0.0.1 that opens CONNECT tunnels (for https endpoints: it pipes bytes, it never sees
the request) and forwards absolute-URL requests (for http endpoints), recording each request line
and Proxy-Authorization header it gets. `refuse` makes it answer every CONNECT with that status.

    with LocalProxy() as proxy:
        env = {"HTTPS_PROXY": proxy.url, "NO_PROXY": ""}
        proxy.lines  # ["CONNECT localhost:8443 HTTP/1.1", "POST http://127.0.0.1:9/v1/... HTTP/1.1"]
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from server_thread import ServerThread


class LocalProxy(ServerThread):
    thread_name = "http-proxy"

    def __init__(self, refuse: int | None = None):
        self.refuse = refuse
        self.lines: list[str] = []
        self.authorizations: list[str | None] = []
        self.port = 0

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _head(self, reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        line, *rest = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
        body = await reader.readexactly(int(headers.get("content-length", 0)))
        self.lines.append(line)
        self.authorizations.append(headers.get("proxy-authorization"))
        return line, headers, body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line, headers, body = await self._head(reader)
            if line.startswith("CONNECT "):
                await self._tunnel(line.split(" ")[1], reader, writer)
            else:
                await self._forward(line, headers, body, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _tunnel(self, authority: str, reader, writer) -> None:
        if self.refuse:
            writer.write(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % self.refuse)
            return
        host, _, port = authority.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    async def _forward(self, line: str, headers: dict[str, str], body: bytes, reader, writer) -> None:
        """Absolute-URL requests, one after another on the client's keep-alive connection, each
        sent upstream in origin form and its answer (content-length framed) sent back."""
        upstream = None
        while True:
            method, absolute, version = line.split(" ")
            url = urlsplit(absolute)
            if upstream is None:
                upstream = await asyncio.open_connection(url.hostname, url.port or 80)
            head = [f"{method} {url.path or '/'}{'?' + url.query if url.query else ''} {version}"]
            head += [f"{k}: {v}" for k, v in headers.items() if k != "proxy-authorization"]
            upstream[1].write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            answer = await upstream[0].readuntil(b"\r\n\r\n")
            length = next((int(h.split(b":")[1]) for h in answer.split(b"\r\n")
                           if h.lower().startswith(b"content-length")), 0)
            writer.write(answer + await upstream[0].readexactly(length))
            await writer.drain()
            line, headers, body = await self._head(reader)
