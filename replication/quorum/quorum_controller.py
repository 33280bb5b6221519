"""QuorumController: the active controller's decisions, written as metadata records.

Every decision — a broker registering or being fenced, a topic created, a partition's leader
or ISR changed — becomes records appended to the metadata log and is then applied to the
controller's MetadataImage; brokers replay the same log (``MetadataImage``), so they see the
same decisions in the same order. Nothing is applied before it is in the log. The rules the
decisions follow live beside it: leader election and ISR changes in ``elections``, what a
broker's fencing or return does to partitions in ``broker_fencing``, when a broker's session
ends in ``broker_sessions``, replica placement and a new topic's records in ``topic_placement``,
reassignments in ``partition_reassignment``.
The metadata log is replicated by the controller quorum (replication/quorum/raft.py, driven over
the network by kbroker/cluster/quorum_driver.py); only the quorum's leader runs these decisions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log import PartitionLog

from . import partition_reassignment as reassignment
from .broker_fencing import drop_from_elr, elections_after_unfence, fence_records
from .broker_sessions import BrokerSessions
from .elections import PREFERRED_ELECTION, TopicConfigs, altered_isr, elect_on_request
from .feature_control import METADATA_VERSION, FeatureUpdate, bootstrap_records, update_records
from .metadata_image import TOPIC_RESOURCE, MetadataImage, TopicImage, decode_batch
from .metadata_records import (
    ClusterIdRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    encode_record,
)
from .partition_registration import PartitionRegistration
from .topic_placement import new_partitions, partition_records, place, place_topic, topic_records
from .topic_rules import check_replica_lists, colliding_topic

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(slots=True, frozen=True)
class ControllerSettings:
    node_id: int
    session_timeout_ms: int
    default_partitions: int
    default_replication_factor: int
    # broker-level defaults a topic falls back to when it has no override
    broker_default: Callable[[str], str | None]
    # kbroker.broker.disconnect.fence.ms: fence a broker this long after the broker side closed
    # its heartbeat connection, unless it is heard from again (0 or less: only the session timeout)
    disconnect_fence_ms: int = 0


class QuorumController:
    """Active only on the quorum's Raft leader (``activate``); decisions are proposed to Raft,
    applied to the image at once (the leader's log is authoritative), and answered to brokers
    once committed (the controller node waits for the high watermark).

    Invariants: ``image`` is the metadata log replayed to its end (rebuilt from the whole log
    at ``activate``, then advanced only by ``_commit``, which applies records after Raft took
    them); while inactive every decision raises NOT_CONTROLLER. Broker sessions
    (``sessions``, see broker_sessions.py) are this controller's own: a newly active controller
    gives every registered broker a full session.
    """

    def __init__(self, metadata_log: PartitionLog, settings: ControllerSettings,
                 propose: Callable[[list[bytes]], int | None]) -> None:
        self.log = metadata_log
        self.settings = settings
        self.propose = propose
        self.image = MetadataImage()
        self.epoch = 0
        self.active = False
        self.sessions = BrokerSessions(settings.session_timeout_ms, settings.disconnect_fence_ms)
        # broker id -> (metadata offset it fetched from, when): DescribeQuorum's observers
        self.observers: dict[int, tuple[int, int]] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    # --- the metadata log -----------------------------------------------------------------

    def activate(self, epoch: int, now_ms: int, image: MetadataImage | None = None) -> None:
        """This node leads the quorum at ``epoch``: its image is ``image`` (the controller node
        passes the latest snapshot and the log after it, ``metadata_snapshot.load_image``), else
        the whole log replayed."""
        if image is None:
            image = MetadataImage()
            for batch in self.log.iter_batches():
                for offset, record in decode_batch(batch):
                    image.apply(offset, record)
        image.on_partition = self.image.on_partition  # the node's election counts go on
        self.image = image
        self.epoch = epoch
        self.active = True
        self.sessions.reset(self.image.brokers, now_ms)
        log.info("controller %d active at epoch %d, metadata offset %d",
                 self.settings.node_id, self.epoch, self.image.offset)
        if self.image.cluster_id and METADATA_VERSION not in self.image.features:
            # A log written before finalized features were records: finalize the levels kbroker ran with.
            self._commit(bootstrap_records(), now_ms)

    def bootstrap(self, cluster_id: str, records: Sequence[MetadataRecord], now_ms: int) -> None:
        """A new cluster's first records: its id, then ``records`` (what Kafka's storage format
        writes: the cluster-wide min.insync.replicas; an imported single-node catalogue)."""
        self._commit([ClusterIdRecord(cluster_id), *bootstrap_records(), *records], now_ms)

    def deactivate(self) -> None:
        if self.active:
            log.info("controller %d is no longer the active controller", self.settings.node_id)
        self.active = False
        self.on_committed()  # long-polling fetches return (with NOT_LEADER_OR_FOLLOWER)

    def _commit(self, records: Sequence[MetadataRecord], now_ms: int) -> int:
        if not records:
            return self.image.offset
        if not self.active:
            raise KafkaError(ErrorCode.not_controller)
        last = self.propose([encode_record(r) for r in records])
        if last is None:
            self.deactivate()
            raise KafkaError(ErrorCode.not_controller)
        for offset, record in enumerate(records, last - len(records) + 1):
            self.image.apply(offset, record)
        return last

    def replay_and_commit(self, records: Sequence[MetadataRecord], now_ms: int) -> int:
        """Commit records a control manager decided (ACLs, SCRAM credentials, client quotas: they
        check the request against ``image`` and hand the records here, as Kafka's
        AclControlManager, ScramControlManager and ClientQuotaControlManager do); the last offset."""
        self._require_active()
        return self._commit(records, now_ms)

    def _require_active(self) -> None:
        if not self.active:
            raise KafkaError(ErrorCode.not_controller)

    def on_committed(self) -> None:
        """The high watermark moved: release long-polling metadata fetches."""
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def now_ms(self) -> int:
        """Wall-clock milliseconds on the metadata log's clock (the node's)."""
        return self.log.clock.wall_ms()

    def wait_for_records(self) -> asyncio.Future[None]:
        """Completed when more records are committed (metadata fetches long-poll on it)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(future)
        future.add_done_callback(self._waiters.discard)
        return future

    # --- brokers --------------------------------------------------------------------------

    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int, rack: str | None,
                        now_ms: int, previous_broker_epoch: int = -1, same_process: bool = False,
                        connection: str | None = None, endpoints: tuple[tuple[str, str, int], ...] = ()) -> int:
        """Register (or re-register after a restart); returns the new broker epoch. A broker that
        did not shut down cleanly with its last epoch (``previous_broker_epoch``) may have lost
        unflushed records, so it loses its ELR claims (KIP-966). Another live incarnation is
        refused until its session expires — unless the new one registers from this controller's
        own process (``same_process``): then the old one was this process's predecessor and is
        certainly gone, and a restarted combined node need not wait out its own session.
        ``connection`` is the connection the request came on (None: in process), the one whose
        closing can end the session early (``BrokerSessions``). ``endpoints`` are all its listeners
        (name, host, port); ``host``/``port`` its inter-broker one."""
        self._require_active()
        current = self.image.brokers.get(broker_id)
        if (current is not None and current.incarnation_id != incarnation_id and not current.fenced
                and not same_process
                and self.sessions.expiry_reason(broker_id, now_ms) is None):
            raise KafkaError(
                ErrorCode.duplicate_broker_registration,
                f"Another broker is registered with that broker id {broker_id} and its session is still live.",
            )
        records: list[MetadataRecord] = []
        if current is not None and not current.fenced:
            records += fence_records(self.image, self._configs, broker_id)
        if current is not None and previous_broker_epoch != current.broker_epoch:
            records += drop_from_elr(self.image, broker_id)
        records.append(RegisterBrokerRecord(broker_id, incarnation_id, host, port, rack, endpoints=endpoints))
        self.sessions.touch(broker_id, now_ms, connection)
        self._commit(records, now_ms)
        epoch = self.image.brokers[broker_id].broker_epoch
        log.info("broker %d registered at %s:%d (epoch %d)", broker_id, host, port, epoch)
        return epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shutdown: bool, now_ms: int, connection: str | None = None) -> tuple[bool, bool, bool]:
        """(is_caught_up, is_fenced, should_shut_down), as BrokerHeartbeat answers; ``connection``
        as for ``register_broker``."""
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch, f"Expected broker epoch for {broker_id} is stale")
        self.sessions.touch(broker_id, now_ms, connection)
        caught_up = metadata_offset >= broker.broker_epoch
        if want_shutdown:
            # Controlled shutdown: move leadership away first, then fence.
            if not broker.fenced:
                self._commit(fence_records(self.image, self._configs, broker_id), now_ms)
                log.info("broker %d finished a controlled shutdown", broker_id)
            return caught_up, True, True
        if broker.fenced and not want_fence and caught_up:
            self._commit([UnfenceBrokerRecord(broker_id, broker_epoch),
                          *elections_after_unfence(self.image, self._configs, broker_id)], now_ms)
            log.info("broker %d unfenced", broker_id)
        return caught_up, self.image.brokers[broker_id].fenced, False

    def connection_closed(self, connection: str, now_ms: int) -> None:
        """The broker side closed ``connection`` (end of file or reset): a broker whose heartbeats
        it carried is fenced ``disconnect_fence_ms`` from now unless it is heard from again."""
        if not self.active:
            return
        for broker_id in self.sessions.connection_closed(connection, now_ms):
            if self.settings.disconnect_fence_ms > 0 and self.image.is_live(broker_id):
                log.info("broker %d closed its controller connection %s: fenced in %d ms unless it reconnects",
                         broker_id, connection, self.settings.disconnect_fence_ms)

    def fence_expired_sessions(self, now_ms: int) -> None:
        """Fence every unfenced broker whose session has ended (``BrokerSessions``)."""
        for broker in list(self.image.brokers.values()):
            if broker.fenced:
                continue
            reason = self.sessions.expiry_reason(broker.broker_id, now_ms)
            if reason is not None:
                log.warning("broker %d fenced: %s", broker.broker_id, reason)
                self._commit(fence_records(self.image, self._configs, broker.broker_id), now_ms)

    def next_session_deadline_ms(self) -> int | None:
        """When the next unfenced broker's session ends if nothing is heard (None: no such broker)."""
        return self.sessions.next_deadline_ms(b.broker_id for b in self.image.brokers.values() if not b.fenced)

    # --- leader elections on request (ElectLeaders) and auto leader rebalance -------------

    def elect_leaders(self, election_type: int, wanted: Sequence[tuple[str, int]] | None,
                      now_ms: int) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: 0 = preferred (the first replica, if live and in sync), 1 = unclean (a
        partition without a leader takes any live replica). ``None`` means every partition."""
        self._require_active()
        if wanted is None:
            wanted = [(t.name, i) for t in self.image.topics.values() for i in t.partitions]
        live = {b.broker_id for b in self.image.live_brokers()}
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        records: list[MetadataRecord] = []
        for name, index in wanted:
            topic = self.image.topics.get(name)
            reg = topic.partitions.get(index) if topic is not None else None
            if topic is None or reg is None:
                results[(name, index)] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            try:
                changed = elect_on_request(election_type, topic, index, reg, live)
            except KafkaError as exc:
                results[(name, index)] = (exc.code, exc.message)
                continue
            records.append(PartitionRecord.of(topic.topic_id, index, changed))
            results[(name, index)] = (ErrorCode.none, None)
        self._commit(records, now_ms)
        return results

    def rebalance_leaders(self, imbalance_percentage: int, now_ms: int) -> int:
        """auto.leader.rebalance.enable: move leadership back to preferred replicas of every
        broker whose share of non-preferred leaders exceeds the percentage; returns how many."""
        preferred_of: dict[int, list[tuple[str, int]]] = {}
        for topic in self.image.topics.values():
            for index, reg in topic.partitions.items():
                preferred_of.setdefault(reg.replicas[0], []).append((topic.name, index))
        moves: list[tuple[str, int]] = []
        for broker_id, partitions in preferred_of.items():
            if not self.image.is_live(broker_id):
                continue
            elsewhere = [(n, i) for n, i in partitions if self.image.topics[n].partitions[i].leader != broker_id]
            if len(elsewhere) * 100 > imbalance_percentage * len(partitions):
                moves += elsewhere
        if not moves:
            return 0
        results = self.elect_leaders(PREFERRED_ELECTION, moves, now_ms)
        moved = sum(1 for error, _message in results.values() if error == ErrorCode.none)
        if moved:
            log.info("auto leader rebalance moved %d leader(s) back to their preferred replica", moved)
        return moved

    # --- reassignment (AlterPartitionReassignments, ListPartitionReassignments) -------------

    def alter_reassignments(self, wanted: Sequence[tuple[str, int, Sequence[int] | None]],
                            allow_replication_factor_change: bool,
                            now_ms: int) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Start (target replicas) or cancel (None) reassignments; see partition_reassignment.py."""
        self._require_active()
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        records: list[MetadataRecord] = []
        for name, index, target in wanted:
            topic = self.image.topics.get(name)
            reg = topic.partitions.get(index) if topic is not None else None
            if topic is None or reg is None:
                results[(name, index)] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            try:
                if target is None:
                    if not (reg.adding or reg.removing):
                        raise KafkaError(ErrorCode.no_reassignment_in_progress)
                    changed = reassignment.cancel(reg)
                else:
                    check_replica_lists([target], self.image.brokers)
                    if not allow_replication_factor_change and len(target) != len(
                            reassignment.target_replicas(reg)):
                        raise KafkaError(ErrorCode.invalid_replication_factor,
                                         "The replication factor is changed from "
                                         f"{len(reassignment.target_replicas(reg))} to {len(target)}")
                    changed = reassignment.maybe_complete(reassignment.start(reg, target))
            except KafkaError as exc:
                results[(name, index)] = (exc.code, exc.message)
                continue
            records.append(PartitionRecord.of(topic.topic_id, index, changed))
            results[(name, index)] = (ErrorCode.none, None)
        self._commit(records, now_ms)
        return results

    def ongoing_reassignments(self, wanted: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int],
                                                                                   PartitionRegistration]:
        self._require_active()
        if wanted is None:
            wanted = [(t.name, i) for t in self.image.topics.values() for i in t.partitions]
        out = {}
        for name, index in wanted:
            topic = self.image.topics.get(name)
            reg = topic.partitions.get(index) if topic is not None else None
            if reg is not None and (reg.adding or reg.removing):
                out[(name, index)] = reg
        return out

    # --- ISR changes (AlterPartition) -----------------------------------------------------

    def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, index: int,
                        leader_epoch: int, partition_epoch: int, new_isr: Sequence[int],
                        now_ms: int) -> PartitionRegistration:
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None or (broker_epoch != -1 and broker.broker_epoch != broker_epoch):
            raise KafkaError(ErrorCode.stale_broker_epoch)
        topic = self.image.topics_by_id.get(topic_id)
        if topic is None or index not in topic.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        reg = topic.partitions[index]
        changed = altered_isr(self.image, self._configs, topic, reg, broker_id, leader_epoch, partition_epoch,
                              new_isr)
        self._commit([PartitionRecord.of(topic_id, index, changed)], now_ms)
        log.info("%s-%d ISR %s -> %s (partition epoch %d)", topic.name, index, list(reg.isr), list(changed.isr),
                 changed.partition_epoch)
        return changed

    # --- topics ---------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: Mapping[int, Sequence[int]], configs: Mapping[str, str],
                     validate_only: bool, now_ms: int) -> TopicImage:
        """Validate (the caller has checked the name and config values) and create."""
        self._require_active()
        if name in self.image.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        collision = colliding_topic(name, self.image.topics)
        if collision:
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Topic '{name}' collides with existing topic: {collision}")
        if assignments:
            replica_lists = [list(assignments[i]) for i in sorted(assignments)]
            self._check_assignment(replica_lists)
        else:
            partitions = self.settings.default_partitions if num_partitions == -1 else num_partitions
            rf = self.settings.default_replication_factor if replication_factor == -1 else replication_factor
            if partitions <= 0:
                raise KafkaError(ErrorCode.invalid_partitions,
                                 "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                raise KafkaError(ErrorCode.invalid_replication_factor,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
            replica_lists = place_topic(self.image.brokers.values(), partitions, rf)
        registrations = new_partitions(replica_lists, self._unfenced(), 0)
        topic_id = uuid.uuid4()
        topic = TopicImage(name, topic_id)
        if validate_only:
            return topic
        self._commit(topic_records(name, topic_id, configs, registrations), now_ms)
        # The replica lists only at DEBUG: for a thousand partitions they are a line of many KB.
        log.info("created topic %s (%s) with %d partition(s), replication factor %d", name, topic_id,
                 len(replica_lists), len(replica_lists[0]) if replica_lists else 0)
        log.debug("topic %s replicas %s", name, replica_lists)
        return self.image.topics[name]

    def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]],
                          validate_only: bool, now_ms: int) -> None:
        self._require_active()
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        old = len(topic.partitions)
        if count < old:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"The topic {name} currently has {old} partition(s); {count} would not be an increase.")
        if count == old:
            raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {old} partition(s).")
        rf = len(topic.partitions[0].replicas)
        if assignments:
            replica_lists = [list(a) for a in assignments]
            self._check_assignment(replica_lists)
        else:
            replica_lists = place(self.image.brokers.values(), count - old, rf)
        registrations = new_partitions(replica_lists, self._unfenced(), old)
        if validate_only:
            return
        self._commit(partition_records(topic.topic_id, old, registrations), now_ms)

    def delete_topic(self, name: str, now_ms: int) -> TopicImage:
        self._require_active()
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        self._commit([RemoveTopicRecord(topic.topic_id)], now_ms)
        log.info("deleted topic %s (%s)", name, topic.topic_id)
        return topic

    def set_configs(self, resource_type: int, resource_name: str, values: Mapping[str, str | None],
                    now_ms: int) -> None:
        """Set (or, with None, delete) config keys of a topic or broker resource."""
        self._require_active()
        if resource_type == TOPIC_RESOURCE and resource_name not in self.image.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{resource_name}' does not exist.")
        self._commit([ConfigRecord(resource_type, resource_name, k, v) for k, v in sorted(values.items())], now_ms)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int, now_ms: int) -> tuple[int, int]:
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch)
        start = self.image.next_producer_id
        self._commit([ProducerIdsRecord(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)], now_ms)
        return start, PRODUCER_ID_BLOCK_SIZE

    # --- finalized features (UpdateFeatures) and UnregisterBroker ---------------------------

    def update_features(self, updates: Sequence[FeatureUpdate], validate_only: bool, now_ms: int) -> None:
        """Finalize new feature levels, all or none (Kafka's rules: ``feature_control``)."""
        self._require_active()
        records = update_records(self.image.features, updates, self.settings.node_id)
        if not validate_only:
            self._commit(records, now_ms)
            log.info("finalized feature levels %s", {r.name: r.feature_level for r in records})

    def unregister_broker(self, broker_id: int, now_ms: int) -> None:
        """Remove a broker's registration; a live one is fenced first (out of every ISR and
        leadership), and it leaves every ELR, as Kafka's handleBrokerUnregistered does."""
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.broker_id_not_registered, f"Broker ID {broker_id} is not currently registered")
        records: list[MetadataRecord] = []
        if not broker.fenced:
            records += fence_records(self.image, self._configs, broker_id)
        records += drop_from_elr(self.image, broker_id)
        records.append(UnregisterBrokerRecord(broker_id, broker.broker_epoch))
        self._commit(records, now_ms)
        log.info("broker %d unregistered (epoch %d)", broker_id, broker.broker_epoch)

    # --- placement and per-topic settings -------------------------------------------------

    def _unfenced(self) -> set[int]:
        """New partitions' ISR candidates (``topic_placement.new_partitions``)."""
        return {b.broker_id for b in self.image.live_brokers()}

    def _check_assignment(self, replica_lists: Sequence[Sequence[int]]) -> None:
        check_replica_lists(replica_lists, self.image.brokers)

    @property
    def _configs(self) -> TopicConfigs:
        """Topic configs resolved over the current image (it is replaced at ``activate``)."""
        return TopicConfigs(self.image, self.settings.broker_default)
