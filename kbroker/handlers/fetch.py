"""Fetch (key 1), v4–18.

Consumers read whole batches from the one containing the fetch offset, up to the high
watermark (read_committed: the last stable offset). KIP-74: the first partition with data
returns at least one whole batch even above max_bytes; later ones are cut at the byte limit
(the client drops a partial trailing batch, as with Kafka). Fewer than min_bytes ready and
max_wait > 0: the request waits on the partitions' futures, then re-reads (no polling).
Response envelope packed by hand; record bytes go out with sendfile (zero copy) when large.
v13+ name topics by id (unknown id: UNKNOWN_TOPIC_ID).
Fetch sessions (KIP-227): kbroker answers session id 0, i.e. "no session created" — the
client keeps sending full fetch requests, which Kafka's protocol allows. A request naming a
session id we never gave gets FETCH_SESSION_ID_NOT_FOUND.
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
from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasReplicas
from kbroker.network.context import EncodedResponse, RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import encode_unsigned_varint, response_header
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.wire import Writer
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, FetchResult
from kbroker.storage.log import FetchSlice

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
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


class Services(HasCatalogue, HasReplicas, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> EncodedResponse:
    services = ctx.services
    version = ctx.api_version
    catalogue = services.catalogue
    session_id = getattr(request, "session_id", 0)
    if session_id != 0:
        error = ErrorCode.fetch_session_id_not_found
        return EncodedResponse([_encode_error(ctx.header.correlation_id, version, error)])
    if version >= FIRST_REPLICA_STATE:
        params = FetchParams(request.replica_state.replica_id, request.replica_state.replica_epoch)
    else:
        params = FetchParams(request.replica_id)
    wanted: list[FetchRequestPartition] = []
    keys: list[tuple[str | None, uuid.UUID | None, int, ErrorCode]] = []
    by_id = version >= FIRST_TOPIC_ID
    named = [(topic, catalogue.topics_by_id.get(topic.topic_id) if by_id and topic.topic_id is not None
              else None if by_id else catalogue.topics.get(topic.topic)) for topic in request.topics]
    # Kafka's checks: a follower needs CLUSTER_ACTION (else every partition is refused), a
    # consumer READ on each topic, decided before the topic's existence is disclosed.
    if params.replica_id >= 0:
        everything_denied, denied = not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION), frozenset()
    else:
        everything_denied = False
        denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (
            info.name if info is not None else topic.topic for topic, info in named if info is not None or not by_id))
    for topic, info in named:
        if by_id:
            topic_id = topic.topic_id  # kio reads the zero UUID as None: never a known id
            name, missing = (info.name if info else None), ErrorCode.unknown_topic_id
        else:
            topic_id = None
            name, missing = topic.topic, ErrorCode.unknown_topic_or_partition
        if everything_denied or (denied and name in denied):
            name, info, missing = None, None, ErrorCode.topic_authorization_failed
        for p in topic.partitions:
            error = ErrorCode.none if info is not None else missing
            keys.append((None if by_id else topic.topic, topic_id, p.partition, error))
            wanted.append(FetchRequestPartition(
                name or "", p.partition, p.fetch_offset, p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1),
                getattr(p, "log_start_offset", -1),
            ))
    if version >= FIRST_CLIENT_METADATA and params.replica_id < 0:
        params = FetchParams(client_rack=request.rack_id or "")
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    results = await services.replicas.fetch(
        wanted, max_wait_ms, request.min_bytes, request.max_bytes, request.isolation_level, params
    )
    for i, (_n, _t, _p, error) in enumerate(keys):
        if error != ErrorCode.none:
            results[i] = FetchResult(error)
    if params.replica_id < 0:
        results = [_as_read_error(r) if r.error != ErrorCode.none else r for r in results]
    return EncodedResponse(_encode(ctx.header.correlation_id, version, keys, results, request.isolation_level))


def _as_read_error(result: FetchResult) -> FetchResult:
    """A consumer's error answer as Kafka's: no offsets (-1) beside the error code."""
    return FetchResult(result.error)


def _encode_error(correlation_id: int, version: int, error: ErrorCode) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE, bytearray(b"\x00\x00\x00\x00"))
    w.out += response_header(correlation_id, API_KEY, w.flexible)
    w.out += _TOP.pack(0, error, 0)
    w.array_length(0)
    w.tagged_fields()
    struct.pack_into(">i", w.out, 0, len(w.out) - 4)
    return bytes(w.out)


def _encode(
    correlation_id: int,
    version: int,
    keys: list[tuple[str | None, uuid.UUID | None, int, ErrorCode]],
    results: list[FetchResult],
    isolation_level: int,
) -> list[bytes | FetchSlice]:
    flexible = version >= FIRST_FLEXIBLE
    w = Writer(flexible, bytearray(b"\x00\x00\x00\x00"))
    w.out += response_header(correlation_id, API_KEY, flexible)
    if version >= 7:
        w.out += _TOP.pack(0, ErrorCode.none, 0)
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
