"""Finalized features (KIP-584): which levels kbroker supports, bootstraps and lets UpdateFeatures set.

A finalized feature level is cluster state: the active controller writes it as a
FeatureLevelRecord and every broker replays it into its ``MetadataImage``, whose offset is the
finalized features epoch ApiVersions reports (as Kafka's brokers report their image's offset).
A new cluster's first records finalize every feature at the highest level kbroker supports,
as ``kafka-storage format`` does with its default release version.

The levels:

- ``metadata.version`` 30 (4.3-IV0, what Kafka 4.3.1 formats with): kbroker answers the APIs at
  the versions a 4.3 cluster gives its clients — KIP-848 groups, KIP-890 transactions, KIP-966
  ELR, which need 4.0-IV0 to 4.0-IV2 — and its own metadata records are JSON that no level
  changes. The supported range starts at 3.3-IV3 (7) as Kafka's does, so a downgrade request
  is refused for Kafka's reason: 4.3-IV0 changed the metadata format, so no level below 30 is
  reachable from 30.
- ``transaction.version`` 0-2, ``group.version`` 0-1, ``eligible.leader.replicas.version`` 0-1.
- ``kraft.version`` 0 only: the quorum's voters are static (``controller.quorum.voters``). As in
  Kafka it is Raft's, not a FeatureLevelRecord; ApiVersions lists it as supported.
- ``share.version`` and ``streams.version`` 0 only: kbroker has no share groups (KIP-932) or
  streams groups (KIP-1071), and their APIs answer as a Kafka broker with these features at 0
  does (UNSUPPORTED_VERSION). Listing them lets ``kafka-features describe`` show every feature
  Kafka 4.3.1 has, at the level kbroker's behaviour matches; an upgrade is refused as for any
  level outside the supported range.

UpdateFeatures follows Kafka's FeatureControlManager: the request's updates are checked in
order and the first refused one fails the whole request (INVALID_UPDATE_VERSION); a level
outside the supported range, an upgrade type that does not match the direction of the change,
and a metadata.version downgrade across a level that changed the metadata format are refused.
Kafka's feature dependencies all name a minimum metadata.version, and kbroker's is always 30,
which meets each of them, so none is checked here.

What the levels change: clients read transaction.version from ApiVersions and use KIP-890's
transactions at 2 (kbroker's coordinator serves both kinds); group.version below 1 switches the
KIP-848 protocol off (ConsumerGroupHeartbeat and ConsumerGroupDescribe answer
UNSUPPORTED_VERSION), as in Kafka. Deviation: eligible.leader.replicas.version 0 is recorded but
does not turn ELR off (replication/quorum/elections.py keeps it on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_records import FeatureLevelRecord

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
METADATA_VERSION_LEVEL = 30  # 4.3-IV0

# Kafka's FeatureUpdate.UpgradeType codes (UpdateFeatures v1+ ``upgrade_type``).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3

SUPPORTED: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (7, METADATA_VERSION_LEVEL),
    KRAFT_VERSION: (0, 0),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
    "share.version": (0, 0),
    "streams.version": (0, 0),
}

# Every metadata.version level that changed the metadata format (Kafka's didMetadataChange):
# a downgrade from above one of these to below it would lose metadata.
_METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30})


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """One entry of an UpdateFeatures request (``level`` 0 disables the feature)."""

    name: str
    level: int
    upgrade_type: int


def bootstrap_records() -> list[FeatureLevelRecord]:
    """A new cluster finalizes every feature at the highest level supported (kraft.version is
    Raft's own and its only level is 0, so it has no record)."""
    return [FeatureLevelRecord(name, high) for name, (_low, high) in SUPPORTED.items()
            if name != KRAFT_VERSION and high > 0]


def update_records(finalized: Mapping[str, int], updates: Sequence[FeatureUpdate],
                   controller_id: int) -> list[FeatureLevelRecord]:
    """The records that make ``updates`` (KafkaError INVALID_UPDATE_VERSION with Kafka's
    message when one is refused; nothing is written then)."""
    records = []
    for update in updates:
        reason = _refusal(finalized, update, controller_id)
        if reason is not None:
            raise KafkaError(ErrorCode.invalid_update_version, reason)
        if update.name != KRAFT_VERSION:  # its only level is the current one: nothing to write
            records.append(FeatureLevelRecord(update.name, update.level))
    return records


def _refusal(finalized: Mapping[str, int], update: FeatureUpdate, controller_id: int) -> str | None:
    name, level = update.name, update.level
    prefix = f"Invalid update version {level} for feature {name}."
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"{prefix} The controller does not support the given upgrade type."
    if level < 0:
        return f"{prefix} A feature version cannot be less than 0."
    if name not in SUPPORTED:
        return f"{prefix} Local controller {controller_id} does not support this feature."
    low, high = SUPPORTED[name]
    if not low <= level <= high:
        return f"{prefix} Local controller {controller_id} only supports versions {low}-{high}"
    current = finalized.get(name, 0)
    if level < current and update.upgrade_type == UPGRADE:
        return (f"{prefix} Can't downgrade the version of this feature without setting the upgrade type to "
                "either safe or unsafe downgrade.")
    if level > current and update.upgrade_type != UPGRADE:
        return f"{prefix} Can't downgrade to a newer version."
    if name == METADATA_VERSION and level < current and any(level < v <= current for v in _METADATA_CHANGED):
        detail = ("Unsafe metadata downgrade is not supported in this version."
                  if update.upgrade_type == UNSAFE_DOWNGRADE
                  else "Refusing to perform the requested downgrade because it might delete metadata information.")
        return f"Unsupported metadata.version downgrade from {current} to {level}. {detail}"
    return None
