"""An asyncio server on its own thread, for the test doubles at the edge (openai_double.py,
http_proxy.py): a subclass defines `_start`, which binds `self._server` and sets `self.port`; the
server runs while its `with` block does, and every connection it still holds is cancelled at
the end."""

from __future__ import annotations

import asyncio
import threading
from typing import Self


class ServerThread:
    thread_name = "test-server"

    async def _start(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start())
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
