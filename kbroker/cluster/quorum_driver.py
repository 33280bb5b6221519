"""QuorumDriver: runs this controller's RaftNode over the network (KRaft's Raft client role).

The RaftNode is sans-IO; this drives it: a timer ticks it every few milliseconds, its outbound
requests go to the other voters' controller listeners over InterBrokerClients bound to this
node's address (a lost request or answer is just a lost message to Raft), their answers are fed
back, and inbound Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch requests from voters are handed to
it and answered with what it replies. After every step ``on_change`` tells the controller node
so it can take or give up the active role and release waiters as the high watermark moves.

A voter that cannot write must not vote or acknowledge. The RaftNode changes its state in
memory and then persists it, so when a write of the quorum-state file or the metadata log
fails (a full disk, an I/O error) the in-memory state is ahead of the disk: the driver then
discards that RaftNode and builds a new one from what is on disk — exactly what a crash and
restart would do, which Raft is safe under — and the message being handled is refused (no vote,
an error code) rather than answered. While writes keep failing the node keeps restarting and
never votes, leads or acknowledges; once they succeed it takes part again by itself.

Requests name this voter's cluster id once it knows one, as Kafka's do; a voter of another cluster
answers INCONSISTENT_CLUSTER_ID (controller_handlers/cluster_identity.py) and ``refused_by`` keeps
who did, so the node can tell when a majority of the quorum does not take it for one of theirs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.inter_broker_client import InterBrokerClient, LinkSecurity
from kbroker.replication.quorum.raft import RaftNode
from kbroker.replication.quorum.raft_messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Outbound,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from kbroker.replication.quorum.raft_wire import (
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kbroker.storage.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)
_refused_log = RateLimitedLogger(log, burst=3)

TICK_S = 0.01
_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)
_RESTART_LOG_INTERVAL_S = 30.0


class QuorumDriver:
    def __init__(self, make_raft: Callable[[int], RaftNode], voters: dict[int, tuple[str, int]],
                 source_host: str | None, on_change: Callable[[], None], clock: Clock = SYSTEM_CLOCK,
                 cluster_id: Callable[[], str] = lambda: "", security: LinkSecurity | None = None) -> None:
        """``make_raft(now_ms)`` builds a RaftNode from the durable state (at start, and again
        after a failed write); ``cluster_id()`` is this voter's cluster id ("" while unknown);
        ``security`` how it reaches the other voters' controller listener."""
        self.make_raft = make_raft
        self.cluster_id = cluster_id
        self.refused_by: set[int] = set()  # voters that answered INCONSISTENT_CLUSTER_ID
        self.clock = clock
        self.raft = make_raft(clock.wall_ms())
        self.on_change = on_change
        self.storage_restarts = 0
        self._restarts_unlogged = 0
        self._restart_logged_at = -_RESTART_LOG_INTERVAL_S
        self.clients = {
            voter: InterBrokerClient(host, port, source_host, f"controller-{self.raft.node_id}", security)
            for voter, (host, port) in voters.items() if voter != self.raft.node_id
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
        try:
            self._send(self.raft.resign(self.clock.wall_ms()))
        except OSError as exc:
            self._restart_from_disk(exc)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=1.0)
        for client in self.clients.values():
            client.close()

    async def _tick_loop(self) -> None:
        while True:
            self.tick(self.clock.wall_ms())
            await asyncio.sleep(TICK_S)

    def tick(self, now_ms: int) -> None:
        """Fire the RaftNode's due timers and send what they produce."""
        try:
            self._send(self.raft.tick(now_ms))
        except OSError as exc:
            self._restart_from_disk(exc)
        self.on_change()

    def propose(self, payloads: list[bytes]) -> int | None:
        """Append as leader; None when not leading or when the write failed (then no longer leading)."""
        try:
            return self.raft.propose(payloads)
        except OSError as exc:
            self._restart_from_disk(exc)
            return None

    def _restart_from_disk(self, exc: OSError) -> None:
        """Discard the RaftNode whose state could not be persisted; rebuild it from the disk."""
        self.storage_restarts += 1
        self._restarts_unlogged += 1
        now = time.monotonic()
        if now - self._restart_logged_at >= _RESTART_LOG_INTERVAL_S:
            log.error("controller %d: a metadata write failed (%s): Raft state rebuilt from disk; this voter "
                      "neither votes nor acknowledges until writes succeed (%d such restart(s) since the last "
                      "message)", self.raft.node_id, exc, self._restarts_unlogged)
            self._restart_logged_at = now
            self._restarts_unlogged = 0
        self.raft = self.make_raft(self.clock.wall_ms())

    def handle_request(self, api_key: int, request: Any) -> Any:
        """An inbound Raft request from a voter; returns the kio response."""
        sender, message = request_from_wire(api_key, request)
        try:
            reaction = self.raft.handle(self.clock.wall_ms(), sender, message)
        except OSError as exc:
            self._restart_from_disk(exc)
            self.on_change()
            return response_to_wire(api_key, self._refusal(message))
        reply = None
        rest: list[Outbound] = []
        for outbound in reaction:
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
        if self.cluster_id():
            request = dataclasses.replace(request, cluster_id=self.cluster_id())
        timeout_s = self.raft.config.request_timeout_ms / 1000
        try:
            response = await self.clients[item.destination].request(api_key, version, request, timeout_s=timeout_s)
        except (ConnectionError, TimeoutError) as exc:
            log.debug("raft message to %d lost: %s", item.destination, exc)
            return
        if response.error_code == ErrorCode.inconsistent_cluster_id:
            self.refused_by.add(item.destination)
            _refused_log.error("voter %d refused %s: INCONSISTENT_CLUSTER_ID (this voter's cluster id is %s, "
                               "voter %d's is another)", item.destination, type(item.message).__name__.removesuffix(
                                   "Request"), self.cluster_id(), item.destination, key=str(item.destination))
            self.on_change()
            return
        answer = response_from_wire(item.message, response)
        try:
            self._send(self.raft.handle(self.clock.wall_ms(), item.destination, answer))
        except OSError as exc:
            self._restart_from_disk(exc)
        self.on_change()

    def _refusal(self, message: RaftMessage) -> RaftMessage:
        """The answer of a voter that could not persist what ``message`` asked of it: no vote, no
        acknowledgement, its durable epoch."""
        code, epoch = ErrorCode.kafka_storage_error, self.raft.epoch
        if isinstance(message, VoteRequest):
            return VoteResponse(code, None, epoch, False)
        if isinstance(message, BeginQuorumEpochRequest):
            return BeginQuorumEpochResponse(code, None, epoch)
        if isinstance(message, EndQuorumEpochRequest):
            return EndQuorumEpochResponse(code, None, epoch)
        if isinstance(message, FetchSnapshotRequest):
            return FetchSnapshotResponse(message.correlation_id, code, None, epoch, message.snapshot_id)
        assert isinstance(message, FetchRequest)
        return FetchResponse(message.correlation_id, code, self.raft.high_watermark, None, epoch, None, ())
