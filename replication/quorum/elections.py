"""How a partition's leader and ISR change: Kafka 4's leader election and ISR rules, as pure
functions of a PartitionRegistration and the live brokers (the controller writes the result).

Leader election: a new leader is the first live replica, in replica order, that is in the ISR;
failing that (KIP-966) a live Eligible Leader Replica — a replica that left an ISR already under
``min.insync.replicas``, so it holds every committed record — or, with the ISR and ELR both
empty, the last known leader; failing that, if ``unclean.leader.election.enable`` is true for
the topic, any live replica (its ISR becomes just itself); otherwise the partition has no leader
(-1) until one of them returns. With ELR the ISR may become empty.

A replica leaving (``without_replica``: its broker fenced) leaves the ISR and, when that ISR is
under min ISR, joins the ELR; the last one out is the last known leader. An ISR change a leader
asks for (``altered_isr``, AlterPartition) is checked against the registration's epochs and
the brokers' liveness. ElectLeaders (``elect_on_request``) moves leadership to the preferred
replica or, unclean, to any live replica of a leaderless partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_image import MetadataImage, TopicImage
from .partition_reassignment import maybe_complete
from .partition_registration import NO_LEADER, PartitionRegistration

log = logging.getLogger(__name__)

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1
ELR_ENABLED = True  # Kafka 4.x: eligible.leader.replicas.version=1 on new clusters


@dataclass(slots=True, frozen=True)
class TopicConfigs:
    """A topic's effective config as the controller resolves it: the topic's override, else the
    cluster-wide dynamic default, else the controller's broker-level default."""

    image: MetadataImage
    broker_default: Callable[[str], str | None]

    def value(self, topic: TopicImage, key: str) -> str | None:
        if key in topic.configs:
            return topic.configs[key]
        if key in self.image.cluster_configs:
            return self.image.cluster_configs[key]
        return self.broker_default(key)

    def min_isr(self, topic: TopicImage) -> int:
        return int(self.value(topic, "min.insync.replicas") or 1)

    def unclean_allowed(self, topic: TopicImage) -> bool:
        return (self.value(topic, "unclean.leader.election.enable") or "false").lower() == "true"


def elect(topic: TopicImage, index: int, reg: PartitionRegistration, live: Collection[int],
          configs: TopicConfigs) -> PartitionRegistration:
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
    if leader == NO_LEADER and configs.unclean_allowed(topic):
        leader = next((r for r in reg.replicas if r in live), NO_LEADER)
        if leader != NO_LEADER:
            isr, elr, last_known = (leader,), (), ()
            log.warning("%s-%d: UNCLEAN leader election of broker %d (ISR was %s): records not on it "
                        "are lost", topic.name, index, leader, list(reg.isr))
    if leader == reg.leader and isr == reg.isr and elr == reg.elr:
        return reg
    epoch = reg.leader_epoch + 1 if leader != reg.leader else reg.leader_epoch
    return replace(reg, leader=leader, isr=isr, elr=elr, last_known_elr=last_known, leader_epoch=epoch)


def without_replica(topic: TopicImage, index: int, reg: PartitionRegistration, broker_id: int,
                    live: Collection[int], configs: TopicConfigs) -> PartitionRegistration:
    """``reg`` once ``broker_id`` is fenced: out of the ISR (into the ELR under min ISR), and a
    new leader elected if it led; the partition epoch moves if anything changed."""
    isr = tuple(r for r in reg.isr if r != broker_id)
    elr, last_known = reg.elr, reg.last_known_elr
    if broker_id in reg.isr:
        if ELR_ENABLED:
            # KIP-966: leaving an ISR already under min ISR keeps the claim (the high watermark
            # could not move without it); the last member out is the last known leader.
            if len(isr) < configs.min_isr(topic):
                elr = tuple(dict.fromkeys((*elr, broker_id)))
            if not isr:
                last_known = (broker_id,)
        elif not isr:
            isr = reg.isr  # without ELR, KRaft keeps the last member in the ISR
    changed = replace(reg, isr=isr, elr=elr, last_known_elr=last_known)
    if reg.leader == broker_id or reg.leader == NO_LEADER:
        changed = elect(topic, index, changed, live, configs)
    if changed != reg:
        changed = replace(changed, partition_epoch=reg.partition_epoch + 1)
    return changed


def elect_on_request(election_type: int, topic: TopicImage, index: int, reg: PartitionRegistration,
                     live: Collection[int]) -> PartitionRegistration:
    """ElectLeaders for one partition: 0 = preferred (the first replica, if live and in sync),
    1 = unclean (a partition without a live leader takes a live ISR member, else any live
    replica). Raises ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE or
    ELIGIBLE_LEADERS_NOT_AVAILABLE as Kafka answers."""
    if election_type == PREFERRED_ELECTION:
        preferred = reg.replicas[0]
        if reg.leader == preferred:
            raise KafkaError(ErrorCode.election_not_needed)
        if preferred not in live or preferred not in reg.isr:
            raise KafkaError(ErrorCode.preferred_leader_not_available,
                             f"Failed to elect leader for partition {topic.name}-{index} under strategy "
                             "PreferredReplicaPartitionLeaderElectionStrategy")
        return replace(reg, leader=preferred, leader_epoch=reg.leader_epoch + 1,
                       partition_epoch=reg.partition_epoch + 1)
    if reg.leader != NO_LEADER and reg.leader in live:
        raise KafkaError(ErrorCode.election_not_needed)
    leader = next((r for r in reg.replicas if r in reg.isr and r in live), None)
    if leader is None:
        leader = next((r for r in reg.replicas if r in live), None)
    if leader is None:
        raise KafkaError(ErrorCode.eligible_leaders_not_available)
    isr = reg.isr if leader in reg.isr else (leader,)
    if leader not in reg.isr:
        log.warning("%s-%d: UNCLEAN leader election of broker %d on request (ISR was %s)",
                    topic.name, index, leader, list(reg.isr))
    return replace(reg, leader=leader, isr=isr, elr=(), leader_epoch=reg.leader_epoch + 1,
                   partition_epoch=reg.partition_epoch + 1)


def altered_isr(image: MetadataImage, configs: TopicConfigs, topic: TopicImage, reg: PartitionRegistration,
                broker_id: int, leader_epoch: int, partition_epoch: int,
                new_isr: Sequence[int]) -> PartitionRegistration:
    """AlterPartition from the leader ``broker_id``: ``reg`` with ``new_isr`` (in replica
    order), the ELR kept in step (KIP-966) and a finished reassignment completed. Raises
    NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST or
    INELIGIBLE_REPLICA (a replica joining the ISR must be live)."""
    if reg.leader != broker_id:
        raise KafkaError(ErrorCode.not_leader_or_follower)
    if leader_epoch < reg.leader_epoch:
        raise KafkaError(ErrorCode.fenced_leader_epoch)
    if partition_epoch != reg.partition_epoch:
        raise KafkaError(ErrorCode.invalid_update_version)
    if broker_id not in new_isr or any(r not in reg.replicas for r in new_isr):
        raise KafkaError(ErrorCode.invalid_request)
    for replica in new_isr:
        if replica not in reg.isr and not image.is_live(replica):
            raise KafkaError(ErrorCode.ineligible_replica)
    isr = tuple(r for r in reg.replicas if r in new_isr)
    elr = tuple(r for r in reg.elr if r not in isr)
    if ELR_ENABLED:
        if len(isr) >= configs.min_isr(topic):
            elr = ()
        else:
            elr = tuple(dict.fromkeys((*elr, *(r for r in reg.isr if r not in isr))))
    return maybe_complete(replace(reg, isr=isr, elr=elr, partition_epoch=reg.partition_epoch + 1))
