"""ControllerLocator: which controller voter a broker talks to, and its connections to it.

A broker sends registration, heartbeats, AlterPartition, producer id blocks and forwarded admin
requests to the active controller (``control`` and ``heartbeats``: in process when that is this
node's own voter, else over sockets bound to the broker's address) and follows the metadata log
over ``metadata``. It learns the active controller as Kafka's brokers do, from the KRaft quorum:
a combined node from its own voter's Raft state (the broker shares its node's Raft client), a
broker-only node from its metadata fetches' answers (current_leader). When the quorum names a
new leader every connection moves to it at once, so the broker heartbeats the new active
controller within the fresh session that controller grants every broker; a metadata fetch
unanswered for ``controller.quorum.fetch.timeout.ms`` sends only the metadata fetch round the
other voters to ask who leads, so a leader that was merely slow keeps the broker's session.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from kbroker.cluster.controller_channel import LocalControllerClient
from kbroker.network.dispatcher import Dispatcher
from kbroker.replication.inter_broker_client import InterBrokerClient, LinkSecurity
from kbroker.replication.quorum.quorum_controller import QuorumController
from kbroker.replication.quorum.raft import RaftNode

log = logging.getLogger(__name__)


class LocalVoter(Protocol):
    """What the lifecycle uses of its own node's controller voter (a combined node)."""

    @property
    def node_id(self) -> int: ...

    @property
    def controller(self) -> QuorumController: ...

    @property
    def dispatcher(self) -> Dispatcher[Any]: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def raft(self) -> RaftNode | None: ...

    def metadata_batches(self, start: int) -> bytes: ...


class ControllerLocator:
    """The controller-finding half of BrokerLifecycleManager (which sets ``_stopped`` and calls
    ``_start_locating`` first)."""

    _stopped: bool

    def _start_locating(self, node_id: int, quorum_voters: tuple[tuple[int, str, int], ...], source: str | None,
                        local_controller: LocalVoter | None, controller_security: LinkSecurity | None) -> None:
        self.node_id = node_id
        self.voters = {node: (h, p) for node, h, p in quorum_voters}
        self.source = source
        self.local_controller = local_controller  # this node's own voter (combined node), if any
        self.controller_security = controller_security
        # The active controller, as far as we know: our own voter first, else the first one.
        self.controller_id = node_id if local_controller is not None else next(iter(self.voters))
        # A broker-only node learns the quorum leader from its metadata fetches' answers
        # (current_leader): the leader and epoch of the last answer, and the (voter, epoch, until)
        # whose fetch failed, so that for a while other voters' stale word naming it at that epoch
        # is not followed back to it (they notice a silent leader no sooner than we do).
        self._fetched_leader: tuple[int, int] | None = None
        self._silent: tuple[int, int, float] | None = None
        self._connect()

    def _connect(self) -> None:
        host, port = self.voters[self.controller_id]
        client_id = f"broker-{self.node_id}"
        self.control: InterBrokerClient | LocalControllerClient
        self.heartbeats: InterBrokerClient | LocalControllerClient
        if self.local_controller is not None and self.controller_id == self.node_id:
            self.control = LocalControllerClient(self.local_controller.node_id, self.local_controller.dispatcher,
                                                 client_id)
            self.heartbeats = self.control  # in process: no connection whose closing could fence us
        else:
            security = self.controller_security
            self.control = InterBrokerClient(host, port, self.source, client_id, security)
            # Registration and heartbeats get a connection of their own (Kafka's lifecycle manager
            # has its own channel too): the controller fences a broker soon after the broker side
            # closes the connection its heartbeats came on (kbroker.broker.disconnect.fence.ms), and
            # a forwarded admin request that times out closes ``control``.
            self.heartbeats = InterBrokerClient(host, port, self.source, client_id + "-heartbeat", security)
        # Separate connections: a heartbeat never waits behind a long-polling metadata fetch.
        self.metadata = InterBrokerClient(host, port, self.source, client_id + "-metadata",
                                          self.controller_security)
        self.metadata_voter = self.controller_id

    def _ask_voter(self, voter: int) -> None:
        """Point only the metadata fetch at ``voter``, to learn who leads now: registration,
        heartbeats and admin requests stay with the controller until an answer names another
        leader, so a leader that was only slow to answer keeps this broker's session."""
        self.metadata.close()
        host, port = self.voters[voter]
        self.metadata_voter = voter
        self.metadata = InterBrokerClient(host, port, self.source, f"broker-{self.node_id}-metadata",
                                          self.controller_security)

    def _silent_voter(self) -> int | None:
        if self._silent is None or time.monotonic() >= self._silent[2]:
            return None
        return self._silent[0]

    def _next_voter(self, after: int) -> int:
        """The voter after ``after`` in id order, passing over one that went silent lately."""
        ids = sorted(self.voters)
        candidates = [v for v in ids if v != self._silent_voter()] or ids
        later = [v for v in candidates if v > after]
        return later[0] if later else candidates[0]

    def _find_controller(self, hint: int | None = None, failed: object = None) -> None:
        """Talk to another voter: the leader a controller named, or the next one in turn.
        ``failed`` is the client whose request failed: when an earlier switch (by another of
        this broker's loops) has already replaced it, its failure says nothing about the current
        controller, and switching again would have the loops close each other's new connections
        in turn (seen: a broker flipping between two voters every 100 ms, fenced for a minute)."""
        if self._stopped or (failed is not None and failed not in (self.control, self.heartbeats, self.metadata)):
            return
        if hint is None:
            hint = self._quorum_leader()
            if hint == self.controller_id:
                return  # the quorum still names it: retry there (a silent leader is noticed by the metadata fetch)
        if hint is None or hint not in self.voters or hint == self.controller_id:
            if len(self.voters) == 1:
                return
            hint = self._next_voter(self.controller_id)
            if hint == self.controller_id:
                return
        log.info("switching to controller %d", hint)
        self._fetched_leader = None  # until the new one answers
        self.control.close()
        self.heartbeats.close()
        self.metadata.close()
        self.controller_id = hint
        self._connect()

    def _quorum_leader(self) -> int | None:
        """The quorum leader as this node knows it: its own voter's Raft state on a combined node
        (the broker shares its node's Raft client, as in Kafka), else the last metadata fetch's answer."""
        if self.local_controller is not None:
            raft = self.local_controller.raft
            return None if raft is None else raft.leader_id
        return None if self._fetched_leader is None else self._fetched_leader[0]

    def _follow_quorum_leader(self) -> None:
        """Move to the voter the quorum now names as leader, at once: the in-flight requests to the
        previous one fail (their connections close) and are sent again to the new one, within the
        fresh session a newly active controller gives every broker."""
        leader = self._quorum_leader()
        if leader is not None and leader != self.controller_id and leader in self.voters:
            self._find_controller(leader)
