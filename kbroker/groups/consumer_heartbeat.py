"""ConsumerGroupHeartbeat (KIP-848) as the consumer group coordinator sees it: the request fields
it acts on and the answer it gives, apart from any wire version (the handler maps both)."""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.groups.assignors import Assignment


@dataclass(slots=True)
class HeartbeatRequest:
    """The fields of ConsumerGroupHeartbeat that the coordinator uses (None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None
