"""The services a broker lends its request handlers: narrow, typed views of the broker's parts.

Why here, beside the handlers: handlers, the wire layer and the composition root must agree on
these contracts without depending on one another. The wire layer (``kbroker.network``) carries
any services object (``RequestContext`` is generic over it) and names none of them; a handler
imports only the protocols below; the composition root (``kbroker.node.broker``) assembles
``BrokerServices`` from its real parts, which satisfy the protocols structurally
(ForwardingController is the ``TopicCatalogue``, ReplicaManager the ``Replicas``, LogManager the
``LogDirs``, the group and transaction coordinators the group and transaction services, the
Broker itself the ``ClusterView``). Nothing here imports ``kbroker.node``. The controller
listener's handlers serve other parts and have their own set in
``kbroker/controller_handlers/services.py``.

Each handler module declares what it may touch as ``class Services(HasX, HasY, Protocol)``
from the ``Has*`` protocols here. Admin requests the controller decides are not a service: the
Dispatcher forwards the modules that declare ``FORWARD_TO_CONTROLLER``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kbroker.handlers.security import SecurityFeatures
from kbroker.protocol.errors import ErrorCode
from kbroker.quotas.client_quotas import ClientQuotas, QuotaWindows
from kbroker.replication.fetch_session import FetchSessionCache
from kbroker.replication.partition import Partition
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.quorum.topic_rules import TopicInfo
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, FetchResult, ProduceResult
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import ConfigEntry, ConfigSource

if TYPE_CHECKING:  # the coordinators' value types; kbroker.groups is being restructured
    from kbroker.groups.classic_group import ClassicGroup, JoinResult, SyncResult
    from kbroker.groups.consumer_group import ConsumerGroup
    from kbroker.groups.consumer_heartbeat import HeartbeatRequest, HeartbeatResult
    from kbroker.groups.offset_store import OffsetAndMetadata
    from kbroker.transactions.transaction_log import TransactionMetadata

BrokerEndpoint = tuple[int, str, int, str | None]  # node id, host, port, rack
GroupOffsets = dict[tuple[str, int], "OffsetAndMetadata"]


class TopicCatalogue(Protocol):
    """The topics this broker knows (replayed from the metadata log) and the changes it forwards
    to the controller (Kafka's MetadataCache plus its forwarding of admin requests)."""

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicInfo]: ...

    @property
    def cluster_configs(self) -> Mapping[str, str]:
        """The cluster-wide dynamic broker defaults, current as the metadata log has them."""
        ...

    @property
    def default_partitions(self) -> int: ...

    def partition_registration(self, name: str, index: int) -> PartitionRegistration | None: ...

    def check_replica_assignment(self, replica_lists: Sequence[Sequence[int]]) -> None: ...

    def topic_overrides(self, name: str) -> dict[str, str]: ...

    def resolved_configs(self, name: str) -> dict[str, ConfigEntry]: ...

    def broker_layers(self, key: str) -> list[tuple[str, ConfigSource]]:
        """A broker key's values in precedence order (this broker's dynamic config first, then
        the dynamic cluster default)."""
        ...

    def dynamic_broker_configs(self, resource_name: str) -> dict[str, str]: ...

    async def set_broker_configs(self, resource_name: str, wanted: Mapping[str, str],
                                 validate_only: bool = False) -> None: ...

    def resource_configs(self, resource_type: int, resource_name: str) -> dict[str, str]:
        """The stored configs of a GROUP or CLIENT_METRICS resource."""
        ...

    def resource_names(self, resource_type: int) -> list[str]: ...

    async def set_resource_configs(self, resource_type: int, resource_name: str, wanted: Mapping[str, str],
                                   validate_only: bool = False) -> None: ...

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Mapping[str, str | None], validate_only: bool = False,
                           assignments: Sequence[Sequence[int]] = ()) -> TopicInfo: ...

    async def delete_topic(self, name: str) -> TopicInfo: ...

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                assignments: Sequence[Sequence[int]] = ()) -> None: ...

    async def set_topic_configs(self, name: str, overrides: Mapping[str, str | None],
                                validate_only: bool = False) -> None: ...


class Replicas(Protocol):
    """This broker's replicas (the ReplicaManager): appends, fetches, and each partition here."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], Partition]: ...

    def get_partition(self, topic: str, index: int) -> Partition:
        """KafkaError when this broker has no replica of it: NOT_LEADER_OR_FOLLOWER if the cluster
        has the partition, UNKNOWN_TOPIC_OR_PARTITION if not."""
        ...

    def append_records(self, topic: str, index: int, records: memoryview, required_acks: int) -> ProduceResult: ...

    async def await_acks(self, results: list[ProduceResult], timeout_ms: int) -> None: ...

    async def fetch(self, requests: list[FetchRequestPartition], max_wait_ms: int, min_bytes: int, max_bytes: int,
                    isolation_level: int, params: FetchParams = ...) -> list[FetchResult]: ...


class LogDirs(Protocol):
    """The log directories and the logs in them (the LogManager)."""

    @property
    def log_dirs(self) -> Sequence[str]: ...

    @property
    def logs(self) -> Mapping[tuple[str, int], PartitionLog]: ...

    def dir_of(self, topic: str, partition: int) -> str: ...

    def checkpoint(self) -> list[str]:
        """Write the checkpoint files now (log start offsets moved)."""
        ...


class ClusterView(Protocol):
    """The cluster as this broker sees it in the metadata log."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int:
        """What Metadata and DescribeCluster name as controller: a live broker, as KRaft brokers answer."""
        ...

    def live_brokers(self, listener: str = "") -> list[BrokerEndpoint]:
        """The unfenced brokers with their endpoints on ``listener`` (a request's
        ``RequestContext.listener``; "": the inter-broker listener); those without it are left out."""
        ...

    def endpoint(self, broker_id: int, listener: str = "") -> tuple[str, int] | None:
        """Where clients of ``listener`` reach a registered broker ("": its inter-broker listener)."""
        ...

    def finalized_features(self) -> tuple[int, Mapping[str, int]]:
        """(epoch, level by feature name) of the finalized features, as replayed (ApiVersions)."""
        ...


class ClassicGroups(Protocol):
    """Classic consumer groups (JoinGroup/SyncGroup/Heartbeat) and the checks offset commits
    make against any group (the GroupCoordinator)."""

    @property
    def groups(self) -> Mapping[str, ClassicGroup]: ...

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker cannot answer for it now."""
        ...

    async def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
                   client_host: str, require_known_member_id: bool) -> JoinResult: ...

    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult: ...

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode: ...

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]: ...

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        api_version: int, transactional: bool = False) -> Callable[[uuid.UUID, int], None] | None:
        """Raises the group's error for the commit, or returns a check each (topic id, partition)
        must pass (an OffsetCommit at an older KIP-848 member epoch), or None."""
        ...

    def commit(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None: ...

    def delete_group(self, group_id: str) -> ErrorCode: ...

    def validate_offset_delete(self, group_id: str) -> tuple[ClassicGroup | ConsumerGroup, set[str] | None]: ...


class ConsumerGroups(Protocol):
    """KIP-848 consumer groups (the ConsumerGroupCoordinator)."""

    @property
    def groups(self) -> Mapping[str, ConsumerGroup]: ...

    def group(self, group_id: str) -> ConsumerGroup | None: ...

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult: ...

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None: ...


class GroupOffsetStore(Protocol):
    """Committed offsets in ``__consumer_offsets`` (the OffsetStore)."""

    def partition_for(self, group: str) -> int: ...

    def fetch(self, group: str) -> GroupOffsets: ...

    def has_pending(self, group: str, tp: tuple[str, int] | None = None) -> bool:
        """Whether a transactional commit to the group (or this partition) is still open."""
        ...

    def commit_transactional(self, group: str, producer_id: int, producer_epoch: int,
                             offsets: GroupOffsets) -> None: ...

    def delete_offsets(self, group: str, tps: list[tuple[str, int]]) -> None: ...

    async def wait_replicated(self, group: str, timeout_ms: int) -> ErrorCode: ...


class TransactionService(Protocol):
    """The transactional ids coordinated here (the TransactionCoordinator)."""

    @property
    def transactions(self) -> Mapping[str, TransactionMetadata]: ...

    def init_producer_id(self, transactional_id: str, timeout_ms: int, given_pid: int, given_epoch: int
                         ) -> tuple[int, int]: ...

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], verify_only: bool = False
                       ) -> dict[tuple[str, int], ErrorCode]: ...

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str) -> None: ...

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                transaction_version: int = 1) -> tuple[int, int]: ...

    async def replicated(self, transactional_id: str) -> None:
        """Return once the id's pending state change is the state (else NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE)."""
        ...

    def describe(self, transactional_id: str) -> TransactionMetadata | None: ...


class ProducerIds(Protocol):
    """Producer ids for idempotent producers, from blocks the controller hands out."""

    def allocate(self) -> int: ...


class TransactionVerifier(Protocol):
    """KIP-890: a partition leader asks the transaction's coordinator (Kafka's AddPartitionsToTxnManager)."""

    async def verify_or_add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: list[tuple[str, int]], add: bool) -> dict[tuple[str, int], ErrorCode]: ...


class TxnMarkerWriter(Protocol):
    """Writes one transaction marker as the partition's leader; answers once the ISR has it."""

    async def __call__(self, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int) -> ErrorCode: ...


@dataclass(slots=True, frozen=True)
class BrokerSettings:
    """The broker keys handlers act on, read once from the configuration by the composition root
    (the defaults are KafkaConfig's).

    None of them can change while the broker runs (kbroker refuses dynamic BROKER resources);
    what can change — the cluster-wide dynamic defaults in the metadata log — reaches handlers
    through ``TopicCatalogue``, current."""

    auto_create_topics_enable: bool
    delete_topic_enable: bool
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offset_metadata_max_bytes: int
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_state_log_segment_bytes: int


# --- what a handler may ask for: one protocol per service ---------------------------------


class HasCatalogue(Protocol):
    @property
    def catalogue(self) -> TopicCatalogue: ...


class HasReplicas(Protocol):
    @property
    def replicas(self) -> Replicas: ...


class HasFetchSessions(Protocol):
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...


class HasLogDirs(Protocol):
    @property
    def log_manager(self) -> LogDirs: ...


class HasCluster(Protocol):
    @property
    def cluster(self) -> ClusterView: ...


class HasClassicGroups(Protocol):
    @property
    def classic_groups(self) -> ClassicGroups: ...


class HasConsumerGroups(Protocol):
    @property
    def consumer_groups(self) -> ConsumerGroups: ...


class HasGroupOffsets(Protocol):
    @property
    def group_offsets(self) -> GroupOffsetStore: ...


class HasTransactions(Protocol):
    @property
    def transaction_coordinator(self) -> TransactionService: ...


class HasProducerIds(Protocol):
    @property
    def producer_ids(self) -> ProducerIds: ...


class HasTransactionVerifier(Protocol):
    @property
    def transaction_verifier(self) -> TransactionVerifier: ...


class HasTxnMarkerWriter(Protocol):
    @property
    def write_txn_marker(self) -> TxnMarkerWriter: ...


class HasSettings(Protocol):
    @property
    def settings(self) -> BrokerSettings: ...


class HasClock(Protocol):
    @property
    def clock(self) -> Clock: ...


class HasClientQuotas(Protocol):
    @property
    def client_quotas(self) -> ClientQuotas: ...


@dataclass(slots=True, frozen=True)
class BrokerServices:
    """Every service a broker lends its handlers; the composition root builds one."""

    catalogue: TopicCatalogue
    replicas: Replicas
    log_manager: LogDirs
    cluster: ClusterView
    classic_groups: ClassicGroups
    consumer_groups: ConsumerGroups
    group_offsets: GroupOffsetStore
    transaction_coordinator: TransactionService
    producer_ids: ProducerIds
    transaction_verifier: TransactionVerifier
    write_txn_marker: TxnMarkerWriter
    settings: BrokerSettings
    clock: Clock
    security: SecurityFeatures = field(default_factory=SecurityFeatures)  # all off: no authorizer yet
    client_quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(dict, QuotaWindows(), SYSTEM_CLOCK))
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)  # KIP-227
