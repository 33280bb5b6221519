"""ForwardingController: a broker's catalogue of topics, and its admin channel to the controller.

The catalogue is not decided here: it is the broker's MetadataImage, replayed from the
controller quorum's metadata log (``sync_from_image``), and every change a client asks for
(create/delete topics, partitions, topic configs) is forwarded to the active controller with
the same Kafka request, as KRaft brokers do (in process on a combined node: see
kbroker/cluster/controller_channel.py). Answers wait until the change has reached this broker's image,
so a client that creates a topic and then asks this broker for its metadata sees it; not until
its replicas' logs exist (Kafka answers at the controller's commit and makes the logs after
publishing the image): a produce that comes first is told UNKNOWN_TOPIC_OR_PARTITION and retried. The read
side — topics, partition registrations, resolved topic configs over the cluster-wide dynamic
and static broker layers — is what request handlers use. ``__consumer_offsets`` and
``__transaction_state`` are created by FindCoordinator; the group and transaction coordinators
follow the leadership of their partitions (``leadership_listeners``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import (
    BrokerLayers,
    ConfigEntry,
    ConfigSource,
    InvalidConfig,
    LogConfig,
    resolve_topic_configs,
    validate_topic_config,
)
from kio.schema.create_partitions.v3 import request as create_partitions_v3
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.delete_topics.v6 import request as delete_topics_v6
from kio.schema.incremental_alter_configs.v1 import request as alter_configs_v1
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from .loop_turns import LoopTurns
from .quorum.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, ImageChanges, MetadataImage
from .quorum.partition_registration import PartitionRegistration
from .quorum.topic_rules import TopicInfo, check_replica_lists, validate_topic_name
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

PROPAGATION_TIMEOUT_S = 30.0
# From this many new replicas in one change on, their logs are written by threads first.
MANY_NEW_LOGS = 8
REQUEST_TIMEOUT_MS = 30000
_SET, _DELETE = i8(0), i8(1)  # IncrementalAlterConfigs operations

# (api key, version, request) -> response, sent to the active controller
ControllerRequest = Callable[[int, int, Any], Awaitable[Any]]


class ForwardingController:
    def __init__(self, node_id: int, replica_manager: ReplicaManager, static_layers: BrokerLayers,
                 default_partitions: int, default_replication_factor: int, send: ControllerRequest) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.static_layers = static_layers
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.cluster_configs: dict[str, str] = {}  # cluster-wide dynamic broker defaults (broker "")
        self.broker_configs: dict[str, str] = {}  # this broker's own dynamic configs (broker "<node id>")
        self._log_configs: dict[str, LogConfig] = {}
        self.send = send
        self.image = MetadataImage()
        self._applied: dict[tuple[str, int], PartitionRegistration] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        # topic -> called with (partition, leads) when this broker starts or stops leading one
        # of its partitions: the group coordinator follows ``__consumer_offsets`` leadership, the
        # transaction coordinator ``__transaction_state``.
        self.leadership_listeners: dict[str, Callable[[int, bool], None]] = {}

    # --- the catalogue, from the metadata log ---------------------------------------------

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.topics_by_id[info.topic_id] = info

    async def sync_from_image(self, image: MetadataImage, changes: ImageChanges | None = None) -> None:
        """Bring the catalogue and this broker's replicas in line with ``image``: what ``changes``
        names (the records applied since the last call), or everything when it is None (the first
        image, a snapshot's). A change to one partition of a thousand touches that one.

        Creating a replica's log touches the disk (about a millisecond each); the work shares the
        event loop (LoopTurns), so a thousand new partitions do not stall heartbeats or fetches.
        """
        turns = LoopTurns()
        self.image = image
        own = image.broker_configs.get(self.node_id, {})
        cluster_changed = image.cluster_configs != self.cluster_configs or own != self.broker_configs
        self.cluster_configs = dict(image.cluster_configs)
        self.broker_configs = dict(own)
        if cluster_changed:
            self._log_configs.clear()
        if changes is None or cluster_changed:  # every topic's resolved configs may have changed
            names = sorted(set(self.topics) | set(image.topics))
        else:
            names = sorted(changes.topics)
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                if name in self.topics:
                    await self._remove_topic(name, turns)
                continue
            rf = len(topic.partitions[0].replicas) if topic.partitions else 0
            known = self.topics.get(name)
            # Logs loaded at start-up got default configs (the catalogue was empty then).
            reconfigure = known is None or known.configs != topic.configs or cluster_changed
            if known is None or known.topic_id != topic.topic_id:
                known = TopicInfo(name, topic.topic_id, len(topic.partitions), rf, dict(topic.configs))
                self._index(known)
            known.partitions, known.replication_factor, known.configs = len(topic.partitions), rf, dict(topic.configs)
            if reconfigure:
                self._log_configs.pop(name, None)
                self.replica_manager.log_manager.reconfigure(name)
        self._wake_waiters()  # the catalogue is current: CreateTopics & co. may answer
        if changes is None:
            touched = [(name, index) for name, topic in image.topics.items() for index in topic.partitions]
        else:
            touched = sorted(changes.partitions)
        await self._create_new_logs(image, touched)
        for name, index in touched:
            topic = image.topics.get(name)
            reg = None if topic is None else topic.partitions.get(index)
            before = self._applied.get((name, index))
            if reg is not None and before != reg:
                assert topic is not None
                self._applied[(name, index)] = reg
                self.replica_manager.apply_partition(name, index, topic.topic_id, reg)
                self._tell_leadership(name, index, before, reg)
                await turns.maybe_yield()
        self.replica_manager.broker_registrations_changed(set(image.brokers) if changes is None else changes.brokers)
        self._wake_waiters()

    async def _create_new_logs(self, image: MetadataImage, touched: list[tuple[str, int]]) -> None:
        """The logs of this broker's new replicas among ``touched``, written together off the loop
        when there are many (one or two go the ordinary way, in ``apply_partition``)."""
        wanted = []
        for name, index in touched:
            topic = image.topics.get(name)
            reg = None if topic is None else topic.partitions.get(index)
            if (topic is not None and reg is not None and self.node_id in reg.replicas
                    and self.replica_manager.log_manager.get(name, index) is None):
                wanted.append((name, index, topic.topic_id, reg))
        if len(wanted) >= MANY_NEW_LOGS:
            await self.replica_manager.create_logs(wanted)

    async def _remove_topic(self, name: str, turns: LoopTurns) -> None:
        """A topic the image no longer has: out of the catalogue, its replicas here deleted."""
        info = self.topics.pop(name)
        self.topics_by_id.pop(info.topic_id, None)
        for index in range(info.partitions):
            self._tell_leadership(name, index, self._applied.pop((name, index), None), None)
            if (name, index) in self.replica_manager.partitions or self.replica_manager.log_manager.get(
                    name, index) is not None:
                self.replica_manager.remove_partition(name, index)
                await turns.maybe_yield()
        log.info("topic %s deleted", name)

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def _tell_leadership(self, name: str, index: int, before: PartitionRegistration | None,
                         after: PartitionRegistration | None) -> None:
        listener = self.leadership_listeners.get(name)
        led = before is not None and before.leader == self.node_id
        leads = after is not None and after.leader == self.node_id
        if listener is not None and led != leads:
            listener(index, leads)

    def partition_registration(self, name: str, index: int) -> PartitionRegistration | None:
        topic = self.image.topics.get(name)
        return None if topic is None else topic.partitions.get(index)

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait until the replayed metadata satisfies ``condition`` (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PROPAGATION_TIMEOUT_S
        while not condition():
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.add(future)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaError(ErrorCode.request_timed_out, "the change has not reached this broker yet")
            try:
                await asyncio.wait_for(future, remaining)
            except TimeoutError:
                raise KafkaError(ErrorCode.request_timed_out,
                                 "the change has not reached this broker yet") from None

    async def _forward(self, api_key: int, version: int, request: Any) -> Any:
        try:
            return await self.send(api_key, version, request)
        except (ConnectionError, TimeoutError) as exc:
            log.warning("forwarding to the controller failed: %s", exc)
            raise KafkaError(ErrorCode.request_timed_out, "the controller did not answer") from None

    # --- changes, forwarded -----------------------------------------------------------------

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Mapping[str, str | None], validate_only: bool = False,
                           assignments: Sequence[Sequence[int]] = ()) -> TopicInfo:
        validate_topic_name(name)
        overrides = self._validated(configs)
        m = create_topics_v7
        request = m.CreateTopicsRequest(
            topics=(m.CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(num_partitions if not assignments else -1),
                replication_factor=i16(replication_factor if not assignments else -1),
                assignments=tuple(m.CreatableReplicaAssignment(partition_index=i32(i),
                                                               broker_ids=tuple(BrokerId(b) for b in brokers))
                                  for i, brokers in enumerate(assignments)),
                configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in overrides.items()),
            ),),
            timeout=_timeout(), validate_only=validate_only,
        )
        response = await self._forward(19, 7, request)
        result = response.topics[0]
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        if validate_only:
            return TopicInfo(name, result.topic_id, result.num_partitions, result.replication_factor, overrides)
        await self._until(lambda: name in self.topics and self.topics[name].topic_id == result.topic_id)
        return self.topics[name]

    def create_internal_topic(self, name: str, num_partitions: int, configs: Mapping[str, str | None]) -> None:
        # Only a coordinator writing to a partition it leads gets here: the topic exists then.
        raise KafkaError(ErrorCode.coordinator_not_available, f"{name} does not exist yet")

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._topic(name)
        m = delete_topics_v6
        response = await self._forward(20, 6, m.DeleteTopicsRequest(
            topics=(m.DeleteTopicState(name=TopicName(name), topic_id=None),), timeout=_timeout()))
        result = response.responses[0]
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        await self._until(lambda: name not in self.topics)
        return info

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                assignments: Sequence[Sequence[int]] = ()) -> None:
        m = create_partitions_v3
        response = await self._forward(37, 3, m.CreatePartitionsRequest(
            topics=(m.CreatePartitionsTopic(
                name=TopicName(name), count=i32(count),
                assignments=tuple(m.CreatePartitionsAssignment(broker_ids=tuple(BrokerId(b) for b in a))
                                  for a in assignments) or None,
            ),),
            timeout=_timeout(), validate_only=validate_only,
        ))
        result = response.results[0]
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        if not validate_only:
            await self._until(lambda: name in self.topics and self.topics[name].partitions >= count)

    async def set_topic_configs(self, name: str, overrides: Mapping[str, str | None],
                                validate_only: bool = False) -> None:
        wanted = self._validated(overrides)
        await self._replace_configs(TOPIC_RESOURCE, name, self._topic(name).configs, wanted, validate_only,
                                    lambda: name in self.topics and self.topics[name].configs == wanted)

    def dynamic_broker_configs(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs of BROKER resource ``resource_name`` ("": the cluster-wide defaults)."""
        return dict(self.cluster_configs if resource_name == "" else self.broker_configs)

    async def set_broker_configs(self, resource_name: str, wanted: Mapping[str, str],
                                 validate_only: bool = False) -> None:
        """Make ``wanted`` the dynamic configs of BROKER resource ``resource_name`` ("" or this
        broker's id), through the controller; returns once this broker has replayed them."""
        await self._replace_configs(BROKER_RESOURCE, resource_name, self.dynamic_broker_configs(resource_name),
                                    wanted, validate_only,
                                    lambda: self.dynamic_broker_configs(resource_name) == dict(wanted))

    def resource_configs(self, resource_type: int, resource_name: str) -> dict[str, str]:
        """The stored configs of a GROUP or CLIENT_METRICS resource (empty when it has none)."""
        return dict(self.image.resource_configs.get((resource_type, resource_name), {}))

    def resource_names(self, resource_type: int) -> list[str]:
        """The GROUP or CLIENT_METRICS resources that have configs, sorted."""
        return sorted(name for kind, name in self.image.resource_configs if kind == resource_type)

    async def set_resource_configs(self, resource_type: int, resource_name: str, wanted: Mapping[str, str],
                                   validate_only: bool = False) -> None:
        """Make ``wanted`` the configs of a GROUP or CLIENT_METRICS resource through the
        controller (ConfigRecords); returns once this broker has replayed them."""
        await self._replace_configs(resource_type, resource_name, self.resource_configs(resource_type, resource_name),
                                    wanted, validate_only,
                                    lambda: self.resource_configs(resource_type, resource_name) == dict(wanted))

    async def _replace_configs(self, resource_type: int, resource_name: str, current: Mapping[str, str],
                               wanted: Mapping[str, str], validate_only: bool, replayed: Callable[[], bool]) -> None:
        """Forward the SETs and DELETEs that turn ``current`` into ``wanted`` as one
        IncrementalAlterConfigs, then wait until this broker has replayed the result."""
        m = alter_configs_v1
        ops = [m.AlterableConfig(name=k, config_operation=_SET, value=v)
               for k, v in wanted.items() if current.get(k) != v]
        ops += [m.AlterableConfig(name=k, config_operation=_DELETE, value=None) for k in current if k not in wanted]
        if validate_only or not ops:
            return
        response = await self._forward(44, 1, m.IncrementalAlterConfigsRequest(
            resources=(m.AlterConfigsResource(resource_type=i8(resource_type), resource_name=resource_name,
                                              configs=tuple(ops)),),
            validate_only=False,
        ))
        result = response.responses[0]
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        await self._until(replayed)

    def check_replica_assignment(self, replica_lists: Sequence[Sequence[int]]) -> None:
        check_replica_lists(replica_lists, self.image.brokers)

    # --- configs --------------------------------------------------------------------------

    def _validated(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in configs.items():
            try:
                validate_topic_config(key, value)
            except InvalidConfig as exc:
                raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
            assert value is not None
            out[key] = value
        return out

    def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(self._topic(name).configs)

    def _topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        return info

    def resolved_configs(self, name: str) -> dict[str, ConfigEntry]:
        overrides = self.topics[name].configs if name in self.topics else {}
        return resolve_topic_configs(overrides, self.broker_layers)

    def broker_layers(self, key: str) -> list[tuple[str, ConfigSource]]:
        """A broker key's values in precedence order: this broker's dynamic config, the
        cluster-wide dynamic default, static, built-in."""
        layers = self.static_layers(key)
        if key in self.cluster_configs:
            layers = [(self.cluster_configs[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), *layers]
        if key in self.broker_configs:
            layers = [(self.broker_configs[key], ConfigSource.DYNAMIC_BROKER_CONFIG), *layers]
        return layers

    def log_config(self, name: str) -> LogConfig:
        """The topic's effective log settings (kept per topic until its configs change: every
        new replica of a topic asks for them)."""
        config = self._log_configs.get(name)
        if config is None:
            config = self._log_configs[name] = LogConfig.from_resolved(self.resolved_configs(name))
        return config


def _timeout() -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=REQUEST_TIMEOUT_MS))
