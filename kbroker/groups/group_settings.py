"""The group service's settings: the group.* and offsets.retention.* keys, typed and read once.

The defaults are Kafka's (and KafkaConfig's), so a test builds the settings it needs by naming
only what it changes. The composition root builds them from its configuration with
``kbroker.config.settings.group_coordinator_settings``; nothing in ``kbroker.groups`` reads the
configuration itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.groups import assignors

_MAX_INT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ClassicGroupSettings:
    """What the classic group protocol is limited by."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = _MAX_INT  # group.max.size


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """The KIP-848 consumer group keys (group.consumer.*)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    max_size: int = _MAX_INT
    # Canonical short names (``assignors.canonical_name``), never empty; the first is the default.
    assignors: tuple[str, ...] = (assignors.UNIFORM, assignors.RANGE)
    migration_policy: str = "bidirectional"  # one of migration.POLICIES


@dataclass(frozen=True, slots=True)
class GroupCoordinatorSettings:
    """The group service's keys, with those of the classic and consumer coordinators it builds."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes, in ms
    offsets_retention_check_interval_ms: int = 600_000
    classic: ClassicGroupSettings = field(default_factory=ClassicGroupSettings)
    consumer: ConsumerGroupSettings = field(default_factory=ConsumerGroupSettings)
