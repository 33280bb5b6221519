"""A TCP proxy in front of a broker that loses selected Produce responses.

It forwards bytes both ways, reading Kafka's size-prefixed frames to learn which request
each response answers (api key by correlation id). For Produce responses chosen by
``decide(n)`` (n counts Produce responses from 0) it either swallows the response ("drop":
the client times the request out and retries) or closes both connections ("close": the
client sees a disconnect and retries at once). Either way the broker has already written
the batch, so the retry is a duplicate the broker must recognise.
Runs its own event loop in a daemon thread; listens on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable

PRODUCE = 0


class ResponseDroppingProxy:
    def __init__(self, target_port: int, decide: Callable[[int], str | None]) -> None:
        self.target_port = target_port
        self.decide = decide
        self.port = 0
        self.produce_responses = 0
        self.dropped = 0
        self.closed = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        api_keys: dict[int, int] = {}

        def close_both() -> None:
            client_w.close()
            broker_w.close()

        async def upstream() -> None:
            while True:
                head = await client_r.readexactly(4)
                frame = await client_r.readexactly(struct.unpack(">i", head)[0])
                api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                api_keys[correlation_id] = api_key
                broker_w.write(head + frame)
                await broker_w.drain()

        async def downstream() -> None:
            while True:
                head = await broker_r.readexactly(4)
                frame = await broker_r.readexactly(struct.unpack(">i", head)[0])
                (correlation_id,) = struct.unpack_from(">i", frame, 0)
                if api_keys.pop(correlation_id, None) == PRODUCE:
                    n = self.produce_responses
                    self.produce_responses += 1
                    action = self.decide(n)
                    if action == "drop":
                        self.dropped += 1
                        continue
                    if action == "close":
                        self.closed += 1
                        close_both()
                        return
                client_w.write(head + frame)
                await client_w.drain()

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            close_both()
