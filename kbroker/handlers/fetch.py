"""Fetch (key 1), v4–18.

Consumers read whole batches from the one containing the fetch offset, up to the high
watermark (read_committed: the last stable offset). KIP-74: the first partition with data
returns at least one whole batch even above max_bytes; later ones are cut at the byte limit
(the client drops a partial trailing batch, as with Kafka). Fewer than min_bytes ready and
max_wait > 0: the request waits on the partitions' futures, then re-reads (no polling).
Response envelope packed by hand; record bytes go out with sendfile (zero copy) when large.
v13+ name topics by id (unknown id: UNKNOWN_TOPIC_ID).
Fetch sessions (KIP-227, v7+): a full fetch with epoch 0 opens a session when the cache has
room (the answer names it), epoch -1 opens none, and either closes the session it names; a fetch
naming a session at its expected epoch is incremental (``fetch_session_context``).
read_committed: data only below the LastStableOffset, and aborted_transactions lists
(producer id, first offset) of every aborted transaction overlapping the fetched range (from
the segments' TransactionIndex), so the client can drop their records; null for
read_uncommitted.
Follower fetches (replica_id >= 0: from the body before v15, from ReplicaState from v15) read
up to the log end offset, not the high watermark, record the follower's position on the leader
(which may move the high watermark or expand the ISR) and, v12+, are answered with a
DivergingEpoch (tagged field 0) when their last fetched epoch disagrees with the leader's
epoch cache. A consumer fetching from a follower gets NOT_LEADER_OR_FOLLOWER.
A consumer's partition answered with an error (OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH, ...)
carries high watermark, last stable offset and log start offset -1 and null aborted
transactions, as Kafka's read error results; a topic or partition the broker does not know
gets an empty aborted-transactions array instead (Kafka refuses those before reading). Follower
fetches keep the real offsets: a kbroker follower starts over at the leader's log start on
OFFSET_OUT_OF_RANGE.
KIP-392: consumers sending v11+ may read from a follower (up to its high watermark); with
``replica.selector.class`` set to Kafka's RackAwareReplicaSelector the leader answers a consumer
with a ``rack_id`` elsewhere with preferred_read_replica (a replica in that rack) and no records.
"""

from __future__ import annotations

import struct
import uuid

from kbroker.handlers.fetch_session_context import Asked, Services, incremental_fetch, open_session
from kbroker.handlers.security import cluster_allowed, denied_names
from kbroker.network.context import EncodedResponse, RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import encode_unsigned_varint, response_header
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.wire import Writer
from kbroker.replication.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, FetchResult
from kbroker.storage.log import FetchSlice

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
FIRST_SESSION = 7  # session_id, session_epoch, forgotten_topics_data (KIP-227)
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
FIRST_CLIENT_METADATA = 11  # rack_id and preferred_read_replica (KIP-392)
FIRST_REPLICA_STATE = 15
DIVERGING_EPOCH_TAG = 0

_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)
_PARTITION = struct.Struct(">ihqq")  # index, error code, high watermark, last stable offset
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_INT32 = struct.Struct(">i")
_EPOCH_END_OFFSET = struct.Struct(">iqB")  # epoch, end offset, empty tagged fields
READ_COMMITTED = 1
# Refused before any read, as Kafka's KafkaApis does: these answers carry an empty (not null)
# aborted-transactions array whatever the isolation level.
UNKNOWN_PARTITION = (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id,
                     ErrorCode.topic_authorization_failed)


async def handle(ctx: RequestContext[Services], request: object) -> EncodedResponse:
    services = ctx.services
    version = ctx.api_version
    if version >= FIRST_REPLICA_STATE:
        params = FetchParams(request.replica_state.replica_id, request.replica_state.replica_epoch)
    else:
        params = FetchParams(request.replica_id)
    if version >= FIRST_SESSION:
        session_id, epoch = request.session_id, request.session_epoch
    else:
        session_id, epoch = INVALID_SESSION_ID, FINAL_EPOCH
    everything_denied = params.replica_id >= 0 and not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    if version >= FIRST_CLIENT_METADATA and params.replica_id < 0:
        params = FetchParams(client_rack=request.rack_id or "")
    if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        error, answered_id, keys, results = await incremental_fetch(
            ctx, request, session_id, epoch, params, everything_denied)
        if error != ErrorCode.none:
            return EncodedResponse([encode_error(ctx.header.correlation_id, version, error, answered_id)], {error: 1})
        counts: dict[int, int] = {}
        return EncodedResponse(encode(ctx.header.correlation_id, version, keys, results, request.isolation_level,
                                      answered_id, counts), counts)
    sessions = services.fetch_sessions
    if session_id != INVALID_SESSION_ID:
        sessions.remove(session_id)  # a full fetch naming a session closes it
    keys, wanted, names = _requested(ctx, request, params, everything_denied)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    results = await services.replicas.fetch(
        wanted, max_wait_ms, request.min_bytes, request.max_bytes, request.isolation_level, params
    )
    for i, (_n, _t, _p, error) in enumerate(keys):
        if error != ErrorCode.none:
            results[i] = FetchResult(error)
    if params.replica_id < 0:
        results = [_as_read_error(r) if r.error != ErrorCode.none else r for r in results]
    new_session = INVALID_SESSION_ID
    if epoch == INITIAL_EPOCH and version >= FIRST_SESSION:
        new_session = open_session(services, version, params, keys, wanted, names, results)
    counts: dict[int, int] = {}
    return EncodedResponse(encode(ctx.header.correlation_id, version, keys, results, request.isolation_level,
                                  new_session, counts), counts)


def _requested(
    ctx: RequestContext[Services], request: object, params: FetchParams, everything_denied: bool,
) -> tuple[list[Asked], list[FetchRequestPartition], list[str | None]]:
    """Every partition a full fetch names: how the answer names it (with a refusal decided
    before reading), what to read, and its topic's name (None: an unknown topic id)."""
    catalogue = ctx.services.catalogue
    version = ctx.api_version
    wanted: list[FetchRequestPartition] = []
    keys: list[Asked] = []
    names: list[str | None] = []
    by_id = version >= FIRST_TOPIC_ID
    named = [(topic, catalogue.topics_by_id.get(topic.topic_id) if by_id and topic.topic_id is not None
              else None if by_id else catalogue.topics.get(topic.topic)) for topic in request.topics]
    # Kafka's checks: a follower needs CLUSTER_ACTION (else every partition is refused), a
    # consumer READ on each topic, decided before the topic's existence is disclosed.
    denied: frozenset[str] = frozenset()
    if params.replica_id < 0:
        denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (
            info.name if info is not None else topic.topic for topic, info in named if info is not None or not by_id))
    for topic, info in named:
        if by_id:
            topic_id = topic.topic_id  # kio reads the zero UUID as None: never a known id
            name, missing = (info.name if info else None), ErrorCode.unknown_topic_id
        else:
            topic_id = None
            name, missing = topic.topic, ErrorCode.unknown_topic_or_partition
        real_name = name
        if everything_denied or (denied and name in denied):
            name, info, missing = None, None, ErrorCode.topic_authorization_failed
        for p in topic.partitions:
            error = ErrorCode.none if info is not None else missing
            keys.append((None if by_id else topic.topic, topic_id, p.partition, error))
            names.append(real_name)
            wanted.append(FetchRequestPartition(
                name or "", p.partition, p.fetch_offset, p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1),
                getattr(p, "log_start_offset", -1),
            ))
    return keys, wanted, names


def _as_read_error(result: FetchResult) -> FetchResult:
    """A consumer's error answer as Kafka's: no offsets (-1) beside the error code."""
    return FetchResult(result.error)


def encode_error(correlation_id: int, version: int, error: ErrorCode, session_id: int = 0) -> bytes:
    """A top-level error answer (a fetch session error) with no partitions."""
    w = Writer(version >= FIRST_FLEXIBLE, bytearray(b"\x00\x00\x00\x00"))
    w.out += response_header(correlation_id, API_KEY, w.flexible)
    w.out += _TOP.pack(0, error, session_id)
    w.array_length(0)
    w.tagged_fields()
    struct.pack_into(">i", w.out, 0, len(w.out) - 4)
    return bytes(w.out)


def encode(
    correlation_id: int,
    version: int,
    keys: list[Asked],
    results: list[FetchResult],
    isolation_level: int,
    session_id: int,
    error_counts: dict[int, int] | None = None,
) -> list[bytes | FetchSlice]:
    """The answer, record bytes as file slices; consecutive partitions of a topic share its entry.
    The top-level and each partition's error code are tallied into ``error_counts`` (for
    ErrorsPerSec) on the way."""
    counts = {} if error_counts is None else error_counts
    counts[ErrorCode.none] = counts.get(ErrorCode.none, 0) + 1  # the top-level code (session errors answer apart)
    flexible = version >= FIRST_FLEXIBLE
    w = Writer(flexible, bytearray(b"\x00\x00\x00\x00"))
    w.out += response_header(correlation_id, API_KEY, flexible)
    if version >= 7:
        w.out += _TOP.pack(0, ErrorCode.none, session_id)
    else:
        w.out += _INT32.pack(0)
    chunks: list[bytes | FetchSlice] = []
    total = 0
    # Group consecutive partitions of the same topic, preserving request order.
    groups: list[list[int]] = []
    for i, (name, topic_id, _p, _e) in enumerate(keys):
        if groups and keys[groups[-1][0]][:2] == (name, topic_id):
            groups[-1].append(i)
        else:
            groups.append([i])
    w.array_length(len(groups))
    for group in groups:
        name, topic_id, _p, _e = keys[group[0]]
        if version >= FIRST_TOPIC_ID:
            w.out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            w.nullable_string(name)
        w.array_length(len(group))
        for i in group:
            r = results[i]
            w.out += _PARTITION.pack(keys[i][2], r.error, r.high_watermark, r.last_stable_offset)
            counts[r.error] = counts.get(r.error, 0) + 1
            if version >= 5:
                w.out += _INT64.pack(r.log_start_offset)
            if r.error in UNKNOWN_PARTITION:
                w.array_length(0)
            elif isolation_level == READ_COMMITTED and r.error == ErrorCode.none:
                w.array_length(len(r.aborted_transactions))
                for txn in r.aborted_transactions:
                    w.out += _ABORTED.pack(txn.producer_id, txn.first_offset)
                    w.tagged_fields()
            else:
                w.array_length(-1)
            if version >= FIRST_CLIENT_METADATA:
                w.out += _INT32.pack(r.preferred_read_replica)
            length = r.records.length if r.records is not None else 0
            w.bytes_length(length)
            if length:
                chunks.append(bytes(w.out))
                total += len(w.out)
                chunks.append(r.records)
                total += length
                w.out = bytearray()
            if flexible and r.diverging_epoch is not None:
                body = _EPOCH_END_OFFSET.pack(r.diverging_epoch[0], r.diverging_epoch[1], 0)
                w.out += b"\x01" + encode_unsigned_varint(DIVERGING_EPOCH_TAG)
                w.out += encode_unsigned_varint(len(body)) + body
            else:
                w.tagged_fields()
        w.tagged_fields()
    w.tagged_fields()  # node_endpoints (v16+) is tagged: omitted, the leader never moves
    chunks.append(bytes(w.out))
    total += len(w.out)
    first = bytearray(chunks[0])
    struct.pack_into(">i", first, 0, total - 4)
    chunks[0] = bytes(first)
    return chunks
