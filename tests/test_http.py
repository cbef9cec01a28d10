"""The lean HTTP/1.1 client endpoints are spoken to with (core/wire/http.py), against a raw asyncio
server in this file: a test double at the boundary that answers with scripted bytes, so framing
(content-length, chunked, gzip), keep-alive and failures can be chosen exactly."""

import asyncio
import gzip

import pytest

from endstate.core.wire.http import HttpClient, ProtocolError, ServerDisconnected


class RawServer:
    """Answers the n-th request with answers[n] (bytes, or None: close without answering);
    counts connections and records each request's head."""

    def __init__(self, answers):
        self.answers, self.heads, self.connections = list(answers), [], 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                self.heads.append(head)
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" % (
        extra, len(body), body)


def post(client, url, body=b'{"q": 1}'):
    return client.post(url, body, {"Content-Type": "application/json", "Authorization": "Bearer k"})


def test_keep_alive_reuses_one_connection_and_sends_what_endpoints_expect():
    async def main():
        async with RawServer([ok(b'{"a": 1}'), ok(b'{"a": 2}')]) as server:
            client = HttpClient(timeout=5)
            assert await post(client, server.url) == (200, b'{"a": 1}')
            assert await post(client, server.url) == (200, b'{"a": 2}')
            client.close()
            return server

    server = asyncio.run(main())
    assert server.connections == 1
    head = server.heads[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    for line in (f"Host: 127.0.0.1:{server.url.split(':')[2].split('/')[0]}", "Content-Length: 8",
                 "Authorization: Bearer k", "Accept-Encoding: identity"):
        assert line in head


def test_chunked_and_gzip_answers_are_decoded():
    body = gzip.compress(b'{"choices": []}')
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n"
               + b"%x\r\n%s\r\n" % (5, body[:5]) + b"%x\r\n%s\r\n" % (len(body) - 5, body[5:]) + b"0\r\n\r\n")

    async def main():
        async with RawServer([chunked, ok(b"{}")]) as server:
            client = HttpClient(timeout=5)
            return await post(client, server.url), await post(client, server.url), server.connections

    assert asyncio.run(main()) == ((200, b'{"choices": []}'), (200, b"{}"), 1)


def test_a_connection_the_server_closed_is_replaced_without_an_error():
    async def main():
        close = ok(b"{}", b"Connection: close\r\n")
        async with RawServer([close, ok(b'{"n": 2}')]) as server:
            client = HttpClient(timeout=5)
            assert await post(client, server.url) == (200, b"{}")
            await asyncio.sleep(0.05)
            assert await post(client, server.url) == (200, b'{"n": 2}')
            return server.connections

    assert asyncio.run(main()) == 2


def test_failures_raise_what_endpoints_classify():
    async def main():
        async with RawServer([None, b"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\nno",
                              b"not http at all\r\n\r\n", None]) as server:
            client = HttpClient(timeout=5)
            with pytest.raises(ServerDisconnected):  # closed without answering: retryable
                await post(client, server.url)
            assert await post(client, server.url) == (500, b"no")  # statuses are the caller's
            with pytest.raises(ProtocolError):
                await post(client, server.url)
            with pytest.raises(ConnectionRefusedError):
                await post(client, "http://127.0.0.1:9/v1/x")

    asyncio.run(main())


def test_no_answer_within_the_timeout_is_a_timeout_error():
    async def main():
        server = await asyncio.start_server(lambda r, w: asyncio.sleep(10), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        with pytest.raises(TimeoutError, match="no answer within 0.2 s"):
            await post(HttpClient(timeout=0.2), url)
        server.close()

    asyncio.run(main())


def test_a_cancelled_request_closes_its_connection_and_unframed_answers_end_at_close():
    async def main():
        sent, closed = asyncio.Event(), asyncio.Event()

        async def slow(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            sent.set()
            await reader.read()  # until the client closes
            closed.set()

        server = await asyncio.start_server(slow, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        request = asyncio.ensure_future(post(HttpClient(timeout=300), url))
        await asyncio.wait_for(sent.wait(), 60)  # cancelled in flight, not before it was sent
        request.cancel()
        await asyncio.wait_for(closed.wait(), 60)
        server.close()

        async with RawServer([b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n{}"]) as old:
            answer = await post(HttpClient(timeout=5), old.url)  # no length: the close ends the body
        return answer

    assert asyncio.run(main()) == (200, b"{}")


def test_a_stale_pooled_connection_is_tried_once_then_a_new_one():
    """A connection the server dropped while idle costs one extra attempt, not one per pooled
    connection: a server that drops every request gets it twice, then the caller's retries decide."""
    async def main():
        async with RawServer([ok(b"{}"), ok(b"{}"), ok(b"{}"), None, None, None, None]) as server:
            client = HttpClient(timeout=5)
            await asyncio.gather(*(post(client, server.url) for _ in range(3)))  # 3 pooled connections
            before = len(server.heads)
            with pytest.raises(ServerDisconnected):
                await post(client, server.url)
            return len(server.heads) - before

    assert asyncio.run(main()) == 2
