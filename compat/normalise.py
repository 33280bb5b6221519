"""Every normalisation the compat suite applies, in one place.

A scenario's outcome on kbroker must equal its outcome on Apache Kafka after these rules and
nothing else. Each rule rewrites only values that legitimately differ between two separate
clusters (identities and addresses of this cluster, clocks) and checks the value's shape
first, so a malformed value is left as it is and shows up in the diff. Rules 1-4 apply to
each target's outcome on its own (``normalise``); rule 5 relates the two (``normalise_pair``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Json = Any

WALL_CLOCK_SLACK_MS = 2000
TOPIC_ID_TEXT = re.compile(r"TopicId: [A-Za-z0-9_-]{22}\b")
TOPIC_ID_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^[A-Za-z0-9_-]{22}$")
ZERO_IDS = frozenset({"00000000-0000-0000-0000-000000000000", "AAAAAAAAAAAAAAAAAAAAAA"})
TIMESTAMP_TEXT = re.compile(r"\b(CreateTime|LogAppendTime):(\d{13})\b")
TIMESTAMP_KEYS = frozenset({"timestamp"})


@dataclass(frozen=True)
class Context:
    """What is specific to one target during one scenario run."""

    bootstrap: str  # "127.0.0.1:port" of the target's listener
    cluster_id: str  # the id the target's cluster was formatted with / generated
    window_ms: tuple[int, int]  # wall-clock span (ms) of the scenario run on this target


def bootstrap_address(text: str, ctx: Context) -> str:
    """Rule 1 — the node's address. Each target listens on its own free port, so its
    advertised ``host:port`` (in broker lists, kcat's ``host:port/id``, CLI output) becomes
    ``<bootstrap>``. Only the exact address of the target being normalised is replaced; node
    ids are not normalised (both targets run node.id=1)."""
    return text.replace(ctx.bootstrap, "<bootstrap>")


def cluster_id(text: str, ctx: Context) -> str:
    """Rule 2 — the cluster id. Random per cluster (``random_cluster_id`` for Kafka,
    generated at first start by kbroker); the target's own id becomes ``<cluster-id>``
    wherever it appears. Any other string is left alone."""
    return text.replace(ctx.cluster_id, "<cluster-id>") if ctx.cluster_id else text


def topic_ids(value: Json, key: str | None) -> Json:
    """Rule 3 — topic ids. Random per topic creation (KIP-516). A ``topic_id`` field holding a
    UUID or a 22-character base64 id, and the text ``TopicId: <22 chars>`` printed by
    TopicCommand, become ``<topic-id>``. The all-zero id (meaning "none") is kept: a target
    that answers it where the other gives a real id differs."""
    if key == "topic_id" and isinstance(value, str) and TOPIC_ID_UUID.match(value) and value not in ZERO_IDS:
        return "<topic-id>"
    if isinstance(value, str):
        return TOPIC_ID_TEXT.sub("TopicId: <topic-id>", value)
    return value


def wall_clock(value: Json, key: str | None, ctx: Context) -> Json:
    """Rule 4 — timestamps taken from a clock during the run: LogAppendTime stamped by the
    broker, and CreateTime stamped by a client that cannot set timestamps (kcat, the console
    producer) or that the scenario leaves unset. An int under a ``timestamp`` key, or
    ``CreateTime:``/``LogAppendTime:`` followed by 13 digits in text, becomes ``<now>`` when it
    lies within the target's run window (± 2 s). Scenarios that set timestamps use values
    hours away from now, which this rule never touches, so a broker that rewrote them (or
    stamped a time outside the run) shows in the diff."""
    lo, hi = ctx.window_ms[0] - WALL_CLOCK_SLACK_MS, ctx.window_ms[1] + WALL_CLOCK_SLACK_MS
    if key in TIMESTAMP_KEYS and isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return "<now>"
    if isinstance(value, str):
        return TIMESTAMP_TEXT.sub(lambda m: f"{m.group(1)}:<now>" if lo <= int(m.group(2)) <= hi else m.group(0),
                                  value)  # fmt: skip
    return value


def normalise(outcome: Json, ctx: Context) -> Json:
    """Rules 1-4 applied to every value of an outcome (dict keys are kept as they are)."""

    def walk(value: Json, key: str | None) -> Json:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, key) for v in value]
        value = topic_ids(value, key)
        value = wall_clock(value, key, ctx)
        if isinstance(value, str):
            value = cluster_id(bootstrap_address(value, ctx), ctx)
        return value

    return walk(outcome, None)


def api_versions_subset(kafka: Json, kbroker: Json) -> tuple[Json, Json]:
    """Rule 5 — ApiVersions. kbroker implements a subset of Kafka's APIs (not yet e.g. group
    membership, ACLs, quotas, share groups), so it may leave APIs out, but every API it
    advertises must be one Kafka advertises, with the identical version range. For an
    outcome ``{"api_versions": {key: [min, max]}}`` Kafka's map is restricted to the keys
    kbroker lists; an extra key or a different range on kbroker's side stays a difference.
    No API is currently exempt from the identical-range requirement."""
    if not (isinstance(kafka, dict) and isinstance(kbroker, dict)):
        return kafka, kbroker
    theirs, ours = kafka.get("api_versions"), kbroker.get("api_versions")
    if isinstance(theirs, dict) and isinstance(ours, dict):
        kafka = {**kafka, "api_versions": {k: v for k, v in theirs.items() if k in ours}}
    return kafka, kbroker


def normalise_pair(kafka: Json, kbroker: Json) -> tuple[Json, Json]:
    """Rules that relate the two normalised outcomes (only rule 5)."""
    return api_versions_subset(kafka, kbroker)
