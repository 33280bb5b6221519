"""The one small API every client adapter implements, and the values it speaks in.

A scenario calls these methods on the client under test; each adapter implements them with
its own client library's public API (or command line). Results are plain JSON-able values:
records as dicts, offsets as ints, and a Kafka error as ``{"error": "NAME"}`` (the protocol
error name when the client exposes the code, else the client's own error name). Which
operations and options an adapter can express is its ``FEATURES`` set; a scenario runs with
every client whose features cover the scenario's ``needs``.

Feature names: ``admin.*`` (create_topic, delete_topic, create_partitions, describe_topic,
list_topics, describe_cluster, describe_configs, alter_configs, delete_records,
list_offsets), ``produce`` plus options (``produce.headers``, ``produce.timestamp``,
``produce.null``: null keys/values, ``produce.acks0``), ``consume`` plus options
(``consume.timestamp``: start at a timestamp, ``consume.fetch``: fetch sizing / wait /
isolation settings, ``consume.reset``: auto.offset.reset, ``consume.multi``: several partitions
at once, ``consume.position``: report positions, ``until_moved``), ``produce.partition``
(explicit partitions), ``produce.binary`` (non-text bytes), ``admin.validate_only``,
``admin.alter_configs_legacy``, ``list_offsets.max_timestamp``, ``list_offsets.isolation``,
``api_versions``, ``transactions`` (a transactional producer: ``transactional_producer``),
``group`` (a subscribing group member: ``group_member``), ``group.consumer_protocol`` (members
with ``group.protocol=consumer``, KIP-848), ``group.admin`` (list/describe/delete groups, list
and alter group offsets; ``group.list_state``: ListGroups state filter), ``group.delete_offsets``
(OffsetDelete), ``group.raw`` (hand-built group requests: ``raw_offset_commit``), ``group.cli``
(``kafka-consumer-groups``: ``consumer_groups``), ``group.assign`` (a consumer with a group id that
assigns its partitions instead of subscribing: ``assigned_member``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compat.security.client_security import ClientSecurity

Json = Any  # a plain JSON-able value
Start = str | int | dict[str, int]  # "earliest" | "latest" | offset | {"timestamp": ms}
OffsetSpec = str | int  # "earliest" | "latest" | "max_timestamp" | timestamp ms


ADMIN_FEATURES = frozenset({
    "admin.create_topic", "admin.delete_topic", "admin.create_partitions", "admin.describe_topic",
    "admin.list_topics", "admin.describe_cluster", "admin.describe_configs", "admin.alter_configs",
    "admin.delete_records", "admin.list_offsets", "admin.validate_only",
})  # fmt: skip
PRODUCE_FEATURES = frozenset({
    "produce", "produce.partition", "produce.headers", "produce.binary", "produce.timestamp", "produce.null",
    "produce.acks0",
})  # fmt: skip
CONSUME_FEATURES = frozenset({
    "consume", "consume.multi", "consume.position", "consume.timestamp", "consume.fetch", "consume.reset",
})  # fmt: skip


class TxnProducer:
    """A transactional producer: ``begin``, ``send`` (flushed; one offset or error per
    record), ``commit``/``abort`` (None, or an error), ``close``."""

    def begin(self) -> Json:
        raise Unsupported("transactions")

    def send(self, topic: str, records: list[Rec]) -> Json:
        raise Unsupported("transactions")

    def commit(self) -> Json:
        raise Unsupported("transactions")

    def abort(self) -> Json:
        raise Unsupported("transactions")

    def close(self) -> None:
        pass


class GroupMember:
    """One consumer subscribed to a topic in a group (auto commit off). ``poll`` drives it
    (joins, heartbeats and fetches happen there), ``assignment``/``positions`` report what it
    owns, ``commit`` commits explicit offsets with metadata, ``committed`` reads them back.
    ``POLL_IN_THREADS``: several members of this client may poll at once, each in a thread."""

    POLL_IN_THREADS = True

    def poll(self, timeout_ms: int = 100) -> list[Json]:
        """Records that arrived (``record`` dicts); [] when none did within the timeout."""
        raise Unsupported("group")

    def assignment(self) -> list[int]:
        """The sorted partitions currently assigned to this member."""
        raise Unsupported("group")

    def positions(self) -> dict[int, int]:
        """{partition: next offset} for the assigned partitions."""
        raise Unsupported("group")

    def commit(self, offsets: dict[int, tuple[int, str]]) -> Json:
        """Commit {partition: (offset, metadata)} synchronously: None or an error."""
        raise Unsupported("group")

    def committed(self, partitions: list[int]) -> Json:
        """{partition (str): [offset, metadata] or None} as the group coordinator reports."""
        raise Unsupported("group")

    def close(self) -> None:
        """Leave the group and release the consumer."""


class Unsupported(Exception):
    """The client cannot express this operation or option."""


@dataclass(frozen=True)
class Rec:
    """A record to produce."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = 0
    timestamp: int | None = None


@dataclass
class FetchSettings:
    """Consumer options a scenario may set (None: the client's default)."""

    reset: str | None = None  # auto.offset.reset: earliest | latest | none
    min_bytes: int | None = None
    max_wait_ms: int | None = None
    max_bytes: int | None = None
    partition_max_bytes: int | None = None
    isolation: str | None = None  # read_committed | read_uncommitted
    extra: dict[str, Any] = field(default_factory=dict)  # the client's own keys (security: objects too)


# How long an empty fetch waits unless a scenario says otherwise. Clients default to 500 ms,
# which librdkafka-based ones (confluent, kcat) pay on every read to the end (they learn of the
# end from an empty fetch); 100 ms changes nothing but the suite's run time.
QUICK_FETCH_WAIT_MS = 100


def fetch_config(s: FetchSettings, names: dict[str, str]) -> dict[str, Any]:
    """A client's consumer config for the settings ``s`` sets; ``names`` maps FetchSettings
    fields (min_bytes, max_wait_ms, max_bytes, partition_max_bytes, isolation) to its keys."""
    out: dict[str, Any] = {}
    for field_name, key in names.items():
        value = getattr(s, field_name)
        if field_name == "max_wait_ms" and value is None:
            value = QUICK_FETCH_WAIT_MS
        if value is not None:
            out[key] = value
    out.update(s.extra)
    return out


def err(name: str) -> dict[str, str]:
    return {"error": name}


def show(data: bytes | None) -> str | None:
    """Bytes as they appear in outcomes: UTF-8 text, or ``hex:...`` when not text."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + data.hex()


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def record(
    partition: int, offset: int, key: bytes | None, value: bytes | None,
    headers: list[tuple[str, bytes | None]], timestamp: int, timestamp_type: str,
) -> dict[str, Json]:  # fmt: skip
    """A consumed record as scenarios see it (timestamp_type: CreateTime / LogAppendTime)."""
    return {
        "partition": partition,
        "offset": offset,
        "key": show(key),
        "value": show(value),
        "headers": [[k, show(v)] for k, v in headers],
        "timestamp": timestamp,
        "timestamp_type": timestamp_type,
    }


class Client:
    """Base adapter: every operation raises Unsupported unless a subclass implements it."""

    name = "client"
    FEATURES: frozenset[str] = frozenset()
    # Ways in a secured listener this client can take: "SSL", "mTLS" (SSL with a client
    # certificate) and the SASL mechanisms (see ``security_config``).
    SECURITY: frozenset[str] = frozenset()

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir  # scratch space of this adapter (files, logs)

    def close(self) -> None:
        """Release connections and processes."""

    def reconnect(self) -> None:
        """Forget long-lived connections (after the target restarted); they reopen on next use."""

    # --- security ----------------------------------------------------------------------------
    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        """This client's settings for ``security`` (TLS, SASL), passed as ``produce``'s ``extra``
        and ``FetchSettings.extra`` (and to ``connect``); values may be objects (an
        ``ssl.SSLContext``) where the library takes one."""
        raise Unsupported("security")

    def connect(self, extra: dict[str, Any]) -> Json:
        """Connect with ``extra`` (``security_config``'s settings) and ask for metadata once:
        None when that worked, else what the client reports (its error's name and message, or
        a tool's exit status and output)."""
        raise Unsupported("security")

    # --- admin -------------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 1,
        configs: dict[str, str] | None = None, validate_only: bool = False,
    ) -> Json:  # fmt: skip
        raise Unsupported("create_topic")

    def delete_topic(self, name: str) -> Json:
        raise Unsupported("delete_topic")

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> Json:
        raise Unsupported("create_partitions")

    def describe_topic(self, name: str) -> Json:
        """{"partitions": [{"partition", "leader", "replicas", "isr"}]} or an error."""
        raise Unsupported("describe_topic")

    def list_topics(self) -> Json:
        """Sorted topic names the cluster reports (internal ones included when listed)."""
        raise Unsupported("list_topics")

    def describe_cluster(self) -> Json:
        """{"cluster_id", "controller", "nodes": [[id, host, port]]}."""
        raise Unsupported("describe_cluster")

    def describe_configs(
        self, kind: str, name: str, keys: list[str] | None = None, synonyms: bool = False
    ) -> Json:
        """{config name: {"value", "source", ...}} for kind "topic" or "broker", or an error."""
        raise Unsupported("describe_configs")

    def alter_configs(self, topic: str, ops: list[tuple[str, str, str | None]]) -> Json:
        """IncrementalAlterConfigs on a topic: ops are (key, "set"|"delete", value)."""
        raise Unsupported("alter_configs")

    def delete_records(self, topic: str, partition: int, before: int) -> Json:
        """The new low watermark, or an error."""
        raise Unsupported("delete_records")

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec, isolation: str | None = None) -> Json:
        """{"offset", "timestamp"} (or what the client reports), or an error. ``isolation``
        (read_committed | read_uncommitted; feature ``list_offsets.isolation``): the request's
        isolation level, None for the client's default."""
        raise Unsupported("list_offsets")

    def api_versions(self) -> Json:
        """{api key (str): [min, max]} as the client saw the broker advertise them."""
        raise Unsupported("api_versions")

    # --- groups ------------------------------------------------------------------------------
    def group_member(self, topic: str, group: str, protocol: str = "classic") -> GroupMember:
        """A new member of ``group`` subscribed to ``topic`` (``protocol``: classic | consumer),
        auto.offset.reset earliest, no auto commit, short session timeout for classic."""
        raise Unsupported("group")

    def assigned_member(self, topic: str, group: str, protocol: str, partitions: list[int]) -> GroupMember:
        """A consumer with ``group.id`` ``group`` and ``group.protocol`` ``protocol`` that assigns
        itself ``partitions`` of ``topic`` (no subscription, so it never joins the group) and
        commits offsets for them: a "simple" group member, as GroupMember otherwise."""
        raise Unsupported("group.assign")

    def list_groups(self, state: str | None = None) -> Json:
        """[[group id, state, ...]] sorted, what the client reports per group; ``state`` (feature
        ``group.list_state``): ListGroups with that state filter (e.g. "Empty", "Stable")."""
        raise Unsupported("group.admin")

    def describe_group(self, group: str) -> Json:
        """{"state", "members", ...} (what the client exposes), or an error."""
        raise Unsupported("group.admin")

    def delete_group(self, group: str) -> Json:
        """DeleteGroups for one group: None or an error."""
        raise Unsupported("group.admin")

    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        """{partition (str): [offset, metadata] or None} for ``group`` via the admin API, or an error."""
        raise Unsupported("group.admin")

    def alter_group_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> Json:
        """Set committed offsets of an inactive group: None, {partition (str): error}, or an error."""
        raise Unsupported("group.admin")

    def delete_group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        """OffsetDelete: {partition (str): None or error}, or a top-level error."""
        raise Unsupported("group.delete_offsets")

    def raw_offset_commit(self, group: str, generation: int, member: str, topic: str, offset: int) -> Json:
        """One OffsetCommit for partition 0 with the given generation and member id: the
        partition's error name or None."""
        raise Unsupported("group.raw")

    # --- data --------------------------------------------------------------------------------
    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        """One result per record: its offset, or an error. ``sync``: one request per record."""
        raise Unsupported("produce")

    def transactional_producer(self, transactional_id: str) -> TxnProducer:
        """A producer with ``transactional.id`` set, its transactions initialised."""
        raise Unsupported("transactions")

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        """{"records": [...]} read from ``start`` until each partition's position reaches
        ``until[p]``, ``max_records`` arrived (the first ``max_records`` are kept) or, with
        ``until_moved``, every position left the numeric ``start`` (an offset reset);
        with "error" when the client reported one."""
        raise Unsupported("consume")
