"""The services a controller node lends the handlers of its controller listener.

Why a set of its own: these handlers serve the quorum, not clients — they decide through the
QuorumController, wait for the decision to be committed, answer Raft requests and describe the
quorum. The composition root (``kbroker.node.controller_node``) implements these protocols with
the ControllerNode itself, whose quorum, listeners and cluster id appear only once it has
started; a handler imports only the protocols here, never ``kbroker.node``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.quorum_controller import QuorumController
from kbroker.replication.quorum.raft import RaftNode
from kbroker.storage.clock import Clock


class HasQuorumController(Protocol):
    """The active controller's decisions, and waiting until the quorum has committed them."""

    @property
    def controller(self) -> QuorumController: ...

    async def committed(self) -> None:
        """Return once every decision taken so far is committed (NOT_CONTROLLER / REQUEST_TIMED_OUT)."""
        ...


class HasRaftQuorum(Protocol):
    """This voter's view of the metadata log's Raft quorum."""

    @property
    def raft(self) -> RaftNode | None: ...

    @property
    def voters(self) -> Mapping[int, tuple[str, int]]: ...

    @property
    def high_watermark(self) -> int: ...

    def handle_raft_request(self, api_key: int, request: Any) -> Any:
        """Vote, BeginQuorumEpoch, EndQuorumEpoch or a voter's Fetch, answered by the Raft core."""
        ...


class HasControllerIdentity(Protocol):
    """Who this controller is and where it listens."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def bound(self) -> Sequence[tuple[str, str, int]]:
        """(listener name, host, port) of the controller listeners, as bound."""
        ...

    @property
    def inter_broker_listener_name(self) -> str | None:
        """The listener a registering broker is reached on (the first it names when None)."""
        ...


class HasCommittedImage(Protocol):
    """This voter's image of the committed metadata log, active or not (None until it has one)."""

    @property
    def committed_image(self) -> MetadataImage | None: ...


class HasClock(Protocol):
    @property
    def clock(self) -> Clock: ...


class ControllerServices(HasQuorumController, HasRaftQuorum, HasControllerIdentity, HasCommittedImage, HasClock,
                         Protocol):
    """Every service a controller node lends its handlers."""
