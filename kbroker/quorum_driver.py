"""QuorumDriver: runs this controller's RaftNode over the network (KRaft's Raft client role).

The RaftNode is sans-IO; this drives it: a timer ticks it every few milliseconds, its outbound
requests go to the other voters' controller listeners over InterBrokerClients bound to this
node's address (a lost request or answer is just a lost message to Raft), their answers are fed
back, and inbound Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch requests from voters are handed to
it and answered with what it replies. After every step ``on_change`` tells the controller node
so it can take or give up the active role and release waiters as the high watermark moves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kbroker.replication.inter_broker_client import InterBrokerClient
from kbroker.replication.raft import RaftNode
from kbroker.replication.raft_messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    Outbound,
    VoteResponse,
)
from kbroker.replication.raft_wire import request_from_wire, request_to_wire, response_from_wire, response_to_wire

log = logging.getLogger(__name__)

TICK_S = 0.01
_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse)


def _now_ms() -> int:
    return int(time.time() * 1000)


class QuorumDriver:
    def __init__(self, raft: RaftNode, voters: dict[int, tuple[str, int]], source_host: str | None,
                 on_change: Callable[[], None]) -> None:
        self.raft = raft
        self.on_change = on_change
        self.clients = {
            voter: InterBrokerClient(host, port, source_host, f"controller-{raft.node_id}")
            for voter, (host, port) in voters.items() if voter != raft.node_id
        }
        self._tasks: set[asyncio.Task[None]] = set()
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        """Resign first if leading (EndQuorumEpoch, given a moment to leave), so another voter
        takes over at once rather than after an election timeout."""
        if self._ticker is not None:
            self._ticker.cancel()
        self._send(self.raft.resign(_now_ms()))
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=1.0)
        for client in self.clients.values():
            client.close()

    async def _tick_loop(self) -> None:
        while True:
            self._send(self.raft.tick(_now_ms()))
            self.on_change()
            await asyncio.sleep(TICK_S)

    def handle_request(self, api_key: int, request: Any) -> Any:
        """An inbound Raft request from a voter; returns the kio response."""
        sender, message = request_from_wire(api_key, request)
        reply = None
        rest: list[Outbound] = []
        for outbound in self.raft.handle(_now_ms(), sender, message):
            if reply is None and outbound.destination == sender and isinstance(outbound.message, _RESPONSES):
                reply = outbound.message
            else:
                rest.append(outbound)
        self._send(rest)
        self.on_change()
        assert reply is not None, f"Raft gave no answer to {message!r}"
        return response_to_wire(api_key, reply)

    def _send(self, outbound: list[Outbound]) -> None:
        for item in outbound:
            if item.destination in self.clients:
                task = asyncio.get_running_loop().create_task(self._deliver(item))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _deliver(self, item: Outbound) -> None:
        api_key, version, request = request_to_wire(item.message)
        timeout_s = self.raft.config.request_timeout_ms / 1000
        try:
            response = await self.clients[item.destination].request(api_key, version, request, timeout_s=timeout_s)
        except (ConnectionError, TimeoutError) as exc:
            log.debug("raft message to %d lost: %s", item.destination, exc)
            return
        answer = response_from_wire(item.message, response)
        self._send(self.raft.handle(_now_ms(), item.destination, answer))
        self.on_change()
