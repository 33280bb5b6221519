"""Offsets retention of classic groups (offsets.retention.minutes), as Kafka's cleanupGroupMetadata.

Kafka's OffsetExpirationCondition: an Empty group with a protocol type loses its offsets the
retention after it became Empty; a group without protocol type (standalone commits), each offset
the retention after its commit; a Stable group of the consumer protocol whose subscriptions are
known, the offsets of topics it does not subscribe to (KIP-496), the retention after their
commit; any other group keeps its offsets. An Empty group left without offsets is deleted
(tombstones for its offsets and metadata; state Dead). Consumer groups (KIP-848) have their own
rule: ``ConsumerGroupCoordinator.expire_offsets``.
"""

from __future__ import annotations

import logging

from kbroker.groups.classic_group import GroupState
from kbroker.groups.group_registry import GroupRegistry
from kbroker.groups.offset_store import OffsetStore
from kbroker.protocol.errors import KafkaError

log = logging.getLogger(__name__)


def expire_classic_group_offsets(registry: GroupRegistry, store: OffsetStore, retention_ms: int,
                                 now_ms: int) -> None:
    for group_id, group in registry.classic_groups().items():
        since: int | None = None
        topics: set[str] = set()
        if not group.protocol_type:
            pass
        elif group.is_in(GroupState.EMPTY):
            since = group.state_timestamp
        elif group.is_in(GroupState.STABLE) and group.protocol_type == "consumer":
            subscribed = group.subscribed_topics()
            if subscribed is None:
                continue
            topics = subscribed
        else:
            continue
        try:
            if store.expire_offsets(group_id, now_ms, retention_ms, since,
                                    topics.__contains__) and group.is_in(GroupState.EMPTY):
                store.delete_group(group_id)
                group.transition(GroupState.DEAD, now_ms)
                registry.remove(group_id)
                log.info("group %s: offsets expired, group deleted", group_id)
        except (OSError, KafkaError) as exc:
            log.error("expiring offsets of group %s failed: %s", group_id, exc)
