"""The names the corpus speaks of, and the topics a target holds before the first frame.

Recorded and generated frames name the same few topics, groups and transactional ids, and the
runner creates those topics (with known records) on each target before fuzzing, so a mutated
frame reaches the code that handles a real topic instead of stopping at UNKNOWN_TOPIC. Each
topic has one role, which keeps the disk invariant meaningful: configurations are altered and
records deleted only on ``fz-admin``, transactions write only to ``fz-txn``, and
``fz-sentinel`` is named by no frame at all, so its log must never change.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    # Named only by requests that may change it on the broker's own schedule (retention,
    # compaction, transaction markers): its log is exempt from the disk invariant.
    mutable: bool = False


# retention.ms=-1 on the checked topics: a produced timestamp far in the past must not let
# time retention delete data behind an accepted request's back.
KEEP = {"retention.ms": "-1"}

DATA = TopicSpec("fz-data", 3, KEEP)
COMPACT = TopicSpec("fz-compact", 1, {**KEEP, "cleanup.policy": "compact"})  # the broker reads keys here
ADMIN = TopicSpec("fz-admin", 1, mutable=True)
TXN = TopicSpec("fz-txn", 1, mutable=True)
SENTINEL = TopicSpec("fz-sentinel", 2, KEEP)
TOPICS = (DATA, COMPACT, ADMIN, TXN, SENTINEL)
NEW_TOPIC_PREFIX = "fz-new-"  # topics the corpus itself creates and deletes

GROUP_PREFIX = "fz-group-"
TRANSACTIONAL_ID_PREFIX = "fz-tx-"
CLIENT_ID = "fz"

# Records the runner writes to every partition of the set-up topics (keyed: fz-compact needs keys).
KNOWN_RECORDS = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(5)]
