"""QuorumController: the active controller's decisions, written as metadata records.

Every decision — a broker registering or being fenced, a topic created, a partition's leader
or ISR changed — becomes records appended to the metadata log and is then applied to the
controller's MetadataImage; brokers replay the same log (``MetadataImage``), so they see the
same decisions in the same order. Nothing is applied before it is in the log.

Leader election (Kafka 4's rules): a new leader is the first live replica, in replica order,
that is in the ISR; failing that (KIP-966) a live Eligible Leader Replica — a replica that left
an ISR already under ``min.insync.replicas``, so it holds every committed record — or, with the
ISR and ELR both empty, the last known leader; failing that, if
``unclean.leader.election.enable`` is true for the topic, any live replica (its ISR becomes just
itself); otherwise the partition has no leader (-1) until one of them returns. With ELR the ISR
may become empty. A broker that re-registers after an unclean shutdown (its previous broker
epoch is not the one it had) loses its ELR claims.
Brokers are fenced when their heartbeats stop for ``broker.session.timeout.ms`` or when they
finish a controlled shutdown; a fenced broker leads nothing.
The metadata log is replicated by the controller quorum (replication/quorum/raft.py, driven over the
network by kbroker/cluster/quorum_driver.py); only the quorum's leader runs these decisions.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log import PartitionLog

from . import partition_reassignment as reassignment
from .metadata_image import (
    TOPIC_RESOURCE,
    MetadataImage,
    MetadataRecord,
    TopicImage,
    decode_batch,
    encode_record,
    partition_record,
)
from .partition_registration import NO_LEADER, PartitionRegistration
from .topic_rules import check_replica_lists, colliding_topic

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


@dataclass(slots=True, frozen=True)
class ControllerSettings:
    node_id: int
    session_timeout_ms: int
    default_partitions: int
    default_replication_factor: int
    # broker-level defaults a topic falls back to when it has no override
    broker_default: Callable[[str], str | None]


class QuorumController:
    """Active only on the quorum's Raft leader (``activate``); decisions are proposed to Raft,
    applied to the image at once (the leader's log is authoritative), and answered to brokers
    once committed (the controller node waits for the high watermark)."""

    def __init__(self, metadata_log: PartitionLog, settings: ControllerSettings,
                 propose: Callable[[list[bytes]], int | None]) -> None:
        self.log = metadata_log
        self.settings = settings
        self.propose = propose
        self.image = MetadataImage()
        self.epoch = 0
        self.active = False
        self._last_heartbeat_ms: dict[int, int] = {}
        # broker id -> (metadata offset it fetched from, when): DescribeQuorum's observers
        self.observers: dict[int, tuple[int, int]] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    # --- the metadata log -----------------------------------------------------------------

    def activate(self, epoch: int, now_ms: int) -> None:
        """This node leads the quorum at ``epoch``: rebuild the image from the whole log."""
        self.image = MetadataImage()
        for batch in self.log.iter_batches():
            for offset, record in decode_batch(batch):
                self.image.apply(offset, record)
        self.epoch = epoch
        self.active = True
        # Live brokers get a full session from now: the heartbeats they sent another
        # controller were not seen by this one.
        for broker in self.image.brokers.values():
            self._last_heartbeat_ms[broker.broker_id] = now_ms
        log.info("controller %d active at epoch %d, metadata offset %d",
                 self.settings.node_id, self.epoch, self.image.offset)

    def bootstrap(self, cluster_id: str, records: Sequence[MetadataRecord], now_ms: int) -> None:
        """A new cluster's first records: its id, then ``records`` (what Kafka's storage format
        writes: the cluster-wide min.insync.replicas; an imported single-node catalogue)."""
        self._commit([{"type": "ClusterIdRecord", "cluster_id": cluster_id}, *records], now_ms)

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

    def _require_active(self) -> None:
        if not self.active:
            raise KafkaError(ErrorCode.not_controller)

    def on_committed(self) -> None:
        """The high watermark moved: release long-polling metadata fetches."""
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    def wait_for_records(self) -> asyncio.Future[None]:
        """Completed when more records are committed (metadata fetches long-poll on it)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(future)
        future.add_done_callback(self._waiters.discard)
        return future

    # --- brokers --------------------------------------------------------------------------

    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int, rack: str | None,
                        now_ms: int, previous_broker_epoch: int = -1, same_process: bool = False) -> int:
        """Register (or re-register after a restart); returns the new broker epoch. A broker that
        did not shut down cleanly with its last epoch (``previous_broker_epoch``) may have lost
        unflushed records, so it loses its ELR claims (KIP-966). Another live incarnation is
        refused until its session expires — unless the new one registers from this controller's
        own process (``same_process``): then the old one was this process's predecessor and is
        certainly gone, and a restarted combined node need not wait out its own session."""
        self._require_active()
        current = self.image.brokers.get(broker_id)
        if (current is not None and current.incarnation_id != incarnation_id and not current.fenced
                and not same_process
                and now_ms - self._last_heartbeat_ms.get(broker_id, 0) < self.settings.session_timeout_ms):
            raise KafkaError(
                ErrorCode.duplicate_broker_registration,
                f"Another broker is registered with that broker id {broker_id} and its session is still live.",
            )
        records: list[MetadataRecord] = []
        if current is not None and not current.fenced:
            records += self._fence_records(broker_id)
        if current is not None and previous_broker_epoch != current.broker_epoch:
            records += self._drop_from_elr(broker_id)
        records.append({
            "type": "RegisterBrokerRecord", "broker_id": broker_id, "incarnation_id": incarnation_id,
            "host": host, "port": port, "rack": rack,
        })
        self._last_heartbeat_ms[broker_id] = now_ms
        self._commit(records, now_ms)
        epoch = self.image.brokers[broker_id].broker_epoch
        log.info("broker %d registered at %s:%d (epoch %d)", broker_id, host, port, epoch)
        return epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shutdown: bool, now_ms: int) -> tuple[bool, bool, bool]:
        """(is_caught_up, is_fenced, should_shut_down), as BrokerHeartbeat answers."""
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch, f"Expected broker epoch for {broker_id} is stale")
        self._last_heartbeat_ms[broker_id] = now_ms
        caught_up = metadata_offset >= broker.broker_epoch
        if want_shutdown:
            # Controlled shutdown: move leadership away first, then fence.
            if not broker.fenced:
                self._commit(self._fence_records(broker_id), now_ms)
                log.info("broker %d finished a controlled shutdown", broker_id)
            return caught_up, True, True
        if broker.fenced and not want_fence and caught_up:
            self._commit([{"type": "UnfenceBrokerRecord", "broker_id": broker_id, "epoch": broker_epoch},
                          *self._elections_after_unfence(broker_id)], now_ms)
            log.info("broker %d unfenced", broker_id)
        return caught_up, self.image.brokers[broker_id].fenced, False

    def fence_expired_sessions(self, now_ms: int) -> None:
        for broker in list(self.image.brokers.values()):
            last = self._last_heartbeat_ms.get(broker.broker_id, 0)
            if not broker.fenced and now_ms - last >= self.settings.session_timeout_ms:
                log.warning("broker %d fenced: no heartbeat for %d ms", broker.broker_id, now_ms - last)
                self._commit(self._fence_records(broker.broker_id), now_ms)

    def _fence_records(self, broker_id: int) -> list[MetadataRecord]:
        """Fence the broker and take it out of every ISR and leadership."""
        records: list[MetadataRecord] = []
        # Apply the fence to a scratch copy of the liveness view so elections skip this broker.
        live = {b.broker_id for b in self.image.live_brokers()} - {broker_id}
        for topic in self.image.topics.values():
            for index, reg in topic.partitions.items():
                if broker_id not in reg.replicas:
                    continue
                changed = self._without_replica(topic, index, reg, broker_id, live)
                if changed != reg:
                    records.append(partition_record(topic.topic_id, index, changed))
        records.append({"type": "FenceBrokerRecord", "broker_id": broker_id,
                        "epoch": self.image.brokers[broker_id].broker_epoch})
        return records

    def _drop_from_elr(self, broker_id: int) -> list[MetadataRecord]:
        records: list[MetadataRecord] = []
        for topic in self.image.topics.values():
            for index, reg in topic.partitions.items():
                if broker_id in reg.elr:
                    log.info("%s-%d: broker %d leaves the ELR (unclean shutdown)", topic.name, index, broker_id)
                    records.append(partition_record(topic.topic_id, index, replace(
                        reg, elr=tuple(r for r in reg.elr if r != broker_id), partition_epoch=reg.partition_epoch + 1)))
        return records

    def _without_replica(self, topic: TopicImage, index: int, reg: PartitionRegistration, broker_id: int,
                         live: set[int]) -> PartitionRegistration:
        isr = tuple(r for r in reg.isr if r != broker_id)
        elr, last_known = reg.elr, reg.last_known_elr
        if broker_id in reg.isr:
            if self._elr_enabled():
                # KIP-966: leaving an ISR already under min ISR keeps the claim (the high watermark
                # could not move without it); the last member out is the last known leader.
                if len(isr) < self._min_isr(topic):
                    elr = tuple(dict.fromkeys((*elr, broker_id)))
                if not isr:
                    last_known = (broker_id,)
            elif not isr:
                isr = reg.isr  # without ELR, KRaft keeps the last member in the ISR
        changed = replace(reg, isr=isr, elr=elr, last_known_elr=last_known)
        if reg.leader == broker_id or reg.leader == NO_LEADER:
            changed = self._elect(topic, index, changed, live)
        if changed != reg:
            changed = replace(changed, partition_epoch=reg.partition_epoch + 1)
        return changed

    def _elections_after_unfence(self, broker_id: int) -> list[MetadataRecord]:
        records: list[MetadataRecord] = []
        live = {b.broker_id for b in self.image.live_brokers()} | {broker_id}
        for topic in self.image.topics.values():
            for index, reg in topic.partitions.items():
                if reg.leader == NO_LEADER and broker_id in reg.replicas:
                    elected = self._elect(topic, index, reg, live)
                    if elected.leader != NO_LEADER:
                        records.append(partition_record(
                            topic.topic_id, index, replace(elected, partition_epoch=reg.partition_epoch + 1)))
        return records

    def _elect(self, topic: TopicImage, index: int, reg: PartitionRegistration,
               live: set[int]) -> PartitionRegistration:
        """Choose a leader for ``reg`` among live brokers; bumps the leader epoch if it changes."""
        leader = next((r for r in reg.replicas if r in reg.isr and r in live), NO_LEADER)
        isr, elr, last_known = reg.isr, reg.elr, reg.last_known_elr
        if leader == NO_LEADER:
            # KIP-966: an eligible leader replica holds every committed record; with none left, the
            # last known leader (the last ISR member) is the one that can have them all.
            candidates = reg.elr if reg.elr or reg.isr else reg.last_known_elr
            leader = next((r for r in reg.replicas if r in candidates and r in live), NO_LEADER)
            if leader != NO_LEADER:
                isr, elr, last_known = (leader,), tuple(r for r in reg.elr if r != leader), ()
                log.info("%s-%d: leader %d elected from the %s", topic.name, index, leader,
                         "ELR" if candidates is reg.elr else "last known ELR")
        if leader == NO_LEADER and self._unclean_allowed(topic):
            leader = next((r for r in reg.replicas if r in live), NO_LEADER)
            if leader != NO_LEADER:
                isr, elr, last_known = (leader,), (), ()
                log.warning("%s-%d: UNCLEAN leader election of broker %d (ISR was %s): records not on it "
                            "are lost", topic.name, index, leader, list(reg.isr))
        if leader == reg.leader and isr == reg.isr and elr == reg.elr:
            return reg
        epoch = reg.leader_epoch + 1 if leader != reg.leader else reg.leader_epoch
        return replace(reg, leader=leader, isr=isr, elr=elr, last_known_elr=last_known, leader_epoch=epoch)

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
            if election_type == PREFERRED_ELECTION:
                preferred = reg.replicas[0]
                if reg.leader == preferred:
                    results[(name, index)] = (ErrorCode.election_not_needed, None)
                    continue
                if preferred not in live or preferred not in reg.isr:
                    results[(name, index)] = (
                        ErrorCode.preferred_leader_not_available,
                        f"Failed to elect leader for partition {name}-{index} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy")
                    continue
                changed = replace(reg, leader=preferred, leader_epoch=reg.leader_epoch + 1,
                                  partition_epoch=reg.partition_epoch + 1)
            else:
                if reg.leader != NO_LEADER and reg.leader in live:
                    results[(name, index)] = (ErrorCode.election_not_needed, None)
                    continue
                leader = next((r for r in reg.replicas if r in reg.isr and r in live), None)
                if leader is None:
                    leader = next((r for r in reg.replicas if r in live), None)
                if leader is None:
                    results[(name, index)] = (ErrorCode.eligible_leaders_not_available, None)
                    continue
                isr = reg.isr if leader in reg.isr else (leader,)
                if leader not in reg.isr:
                    log.warning("%s-%d: UNCLEAN leader election of broker %d on request (ISR was %s)",
                                name, index, leader, list(reg.isr))
                changed = replace(reg, leader=leader, isr=isr, elr=(), leader_epoch=reg.leader_epoch + 1,
                                  partition_epoch=reg.partition_epoch + 1)
            records.append(partition_record(topic.topic_id, index, changed))
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
            records.append(partition_record(topic.topic_id, index, changed))
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
        if reg.leader != broker_id:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if leader_epoch < reg.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        if partition_epoch != reg.partition_epoch:
            raise KafkaError(ErrorCode.invalid_update_version)
        if broker_id not in new_isr or any(r not in reg.replicas for r in new_isr):
            raise KafkaError(ErrorCode.invalid_request)
        for replica in new_isr:
            if replica not in reg.isr and not self.image.is_live(replica):
                raise KafkaError(ErrorCode.ineligible_replica)
        isr = tuple(r for r in reg.replicas if r in new_isr)
        elr = tuple(r for r in reg.elr if r not in isr)
        min_isr = self._min_isr(topic)
        if self._elr_enabled():
            if len(isr) >= min_isr:
                elr = ()
            else:
                elr = tuple(dict.fromkeys((*elr, *(r for r in reg.isr if r not in isr))))
        changed = reassignment.maybe_complete(replace(reg, isr=isr, elr=elr, partition_epoch=reg.partition_epoch + 1))
        self._commit([partition_record(topic_id, index, changed)], now_ms)
        log.info("%s-%d ISR %s -> %s (partition epoch %d)", topic.name, index, list(reg.isr), list(isr),
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
            replica_lists = self._place(partitions, rf, 0)
        topic_id = uuid.uuid4()
        topic = TopicImage(name, topic_id)
        if validate_only:
            return topic
        records: list[MetadataRecord] = [{"type": "TopicRecord", "name": name, "topic_id": str(topic_id)}]
        records += [
            {"type": "ConfigRecord", "resource_type": TOPIC_RESOURCE, "resource_name": name, "name": k, "value": v}
            for k, v in sorted(configs.items())
        ]
        records += [
            partition_record(topic_id, i, PartitionRegistration(tuple(rs), tuple(rs), rs[0], 0, 0))
            for i, rs in enumerate(replica_lists)
        ]
        self._commit(records, now_ms)
        log.info("created topic %s (%s) with %d partition(s), replicas %s", name, topic_id, len(replica_lists),
                 replica_lists)
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
            replica_lists = self._place(count - old, rf, old)
        if validate_only:
            return
        self._commit([
            partition_record(topic.topic_id, old + i, PartitionRegistration(tuple(rs), tuple(rs), rs[0], 0, 0))
            for i, rs in enumerate(replica_lists)
        ], now_ms)

    def delete_topic(self, name: str, now_ms: int) -> TopicImage:
        self._require_active()
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        self._commit([{"type": "RemoveTopicRecord", "topic_id": str(topic.topic_id)}], now_ms)
        log.info("deleted topic %s (%s)", name, topic.topic_id)
        return topic

    def set_configs(self, resource_type: int, resource_name: str, values: Mapping[str, str | None],
                    now_ms: int) -> None:
        """Set (or, with None, delete) config keys of a topic or broker resource."""
        self._require_active()
        if resource_type == TOPIC_RESOURCE and resource_name not in self.image.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{resource_name}' does not exist.")
        self._commit([
            {"type": "ConfigRecord", "resource_type": resource_type, "resource_name": resource_name,
             "name": k, "value": v}
            for k, v in sorted(values.items())
        ], now_ms)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int, now_ms: int) -> tuple[int, int]:
        self._require_active()
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch)
        start = self.image.next_producer_id
        self._commit([{"type": "ProducerIdsRecord", "broker_id": broker_id, "broker_epoch": broker_epoch,
                       "next_producer_id": start + PRODUCER_ID_BLOCK_SIZE}], now_ms)
        return start, PRODUCER_ID_BLOCK_SIZE

    # --- placement and per-topic settings -------------------------------------------------

    def _place(self, partitions: int, replication_factor: int, first_partition: int) -> list[list[int]]:
        """Round-robin placement over live brokers, alternating racks (as Kafka's rack-aware placement)."""
        live = self.image.live_brokers()
        if replication_factor > len(live):
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only {len(live)} broker(s) are registered or "
                "some brokers have all their log directories cordoned.",
            )
        by_rack: dict[str | None, list[int]] = {}
        for broker in live:
            by_rack.setdefault(broker.rack, []).append(broker.broker_id)
        ordered: list[int] = []
        racks = list(by_rack.values())
        while any(racks):
            for members in racks:
                if members:
                    ordered.append(members.pop(0))
        n = len(ordered)
        start = random.randrange(n)
        # Leaders rotate over the brokers; followers are the next brokers in the rack-alternating
        # order, so with balanced racks every partition's replicas span the racks.
        return [
            [ordered[(start + p + j) % n] for j in range(replication_factor)]
            for p in range(first_partition, first_partition + partitions)
        ]

    def _check_assignment(self, replica_lists: Sequence[Sequence[int]]) -> None:
        check_replica_lists(replica_lists, self.image.brokers)

    def _topic_config(self, topic: TopicImage, key: str) -> str | None:
        if key in topic.configs:
            return topic.configs[key]
        if key in self.image.cluster_configs:
            return self.image.cluster_configs[key]
        return self.settings.broker_default(key)

    def _min_isr(self, topic: TopicImage) -> int:
        return int(self._topic_config(topic, "min.insync.replicas") or 1)

    def _unclean_allowed(self, topic: TopicImage) -> bool:
        return (self._topic_config(topic, "unclean.leader.election.enable") or "false").lower() == "true"

    def _elr_enabled(self) -> bool:
        return True  # Kafka 4.x: eligible.leader.replicas.version=1 on new clusters

