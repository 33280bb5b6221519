"""Produce (key 0), v3–13.

Request decoded by hand so each partition's records are a writable slice of the frame;
batches are validated (size, magic 2, CRC32C, counts) and appended as opaque bytes with
offsets patched in place. Response packed by hand. v13 names topics by id.
acks=0 gets no response; acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS). acks=-1 needs
``min.insync.replicas`` in-sync replicas (NOT_ENOUGH_REPLICAS); every partition of the request
is appended first, then the response waits for all of them together until the high watermark
passes their records (Kafka's delayed produce): still uncommitted after timeout_ms is
REQUEST_TIMED_OUT, leadership lost meanwhile NOT_LEADER_OR_FOLLOWER. A broker that does not
lead the partition answers NOT_LEADER_OR_FOLLOWER. Per-record errors (KIP-467)
come back as record_errors with the error message (v8+).
Like Kafka 4 (KAFKA-18659), ApiVersions lists v0–13 but a v0–2 request closes the connection:
librdkafka (e.g. 2.0.2 in Debian's kcat) only compresses with gzip/snappy/lz4 when the broker
lists Produce v0, and silently sends uncompressed batches otherwise.
Batches with a producer id go through the partition's ProducerStateManager (header fields
only): a retry of one of the producer's last five batches is answered with its original base
offset and NONE, without writing it again; a sequence gap or a new epoch not starting at 0
is OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, a non-transactional
batch during the producer's open transaction INVALID_TXN_STATE.
Transactional batches are verified first (KIP-890 part 1, Kafka's ReplicaManager and
AddPartitionsToTxnManager): when the producer has no open transaction of its epoch on the
partition, the leader asks the coordinator (in-process, or in a cluster the leader of the
id's ``__transaction_state`` partition with AddPartitionsToTxn v5) whether the partition is in
the transaction (one question for all the request's partitions that need one; all its
transactional batches must be of one producer id and epoch, else INVALID_PRODUCER_ID_MAPPING
for every partition, as Kafka). v0–10 are refused with INVALID_TXN_STATE "Partition was not added to the
transaction", v11 with TRANSACTION_ABORTABLE; v12+ (KIP-890 part 2) adds the partition
instead. A fenced epoch is INVALID_PRODUCER_EPOCH; a transaction being completed is
NOT_ENOUGH_REPLICAS (retriable) before v12, CONCURRENT_TRANSACTIONS from v12; a coordinator
that cannot be asked (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
NETWORK_EXCEPTION) is NOT_ENOUGH_REPLICAS "Unable to verify ...", as Kafka's ReplicaManager.
"""

from __future__ import annotations

import struct
import uuid
from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasReplicas, HasTransactionVerifier
from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS
from kbroker.network.context import NO_RESPONSE, EncodedResponse, RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import MalformedRequest, response_header
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import HEADER_SIZE, read_header
from kbroker.protocol.wire import Reader, Writer
from kbroker.replication.partition import Partition
from kbroker.replication.quorum.topic_rules import INTERNAL_TOPICS
from kbroker.replication.replica_manager import ProduceResult
from kbroker.replication.stage_trace import DEBUG, TRACE, stage
from kbroker.transactions.verification import ended_during_verification, in_transaction, verification_guard

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
ADVERTISED_MIN_VERSION = 0  # see the docstring: for librdkafka's compression check
FIRST_FLEXIBLE = 9
FIRST_TOPIC_ID = 13
FIRST_ABORTABLE = 11  # TRANSACTION_ABORTABLE instead of INVALID_TXN_STATE (Kafka's GENERIC_ERROR_SUPPORTED)
FIRST_ADD_PARTITION = 12  # the partition is added to the transaction, not only verified (ADD_PARTITION)

# Coordinator errors older producers would not retry: answered as NOT_ENOUGH_REPLICAS (retriable).
UNVERIFIABLE = (ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress,
                ErrorCode.coordinator_not_available, ErrorCode.not_coordinator)
# Kafka's internal topics: only their coordinators write them, and a client only under Kafka's
# admin client id (ReplicaManager's internalTopicsAllowed), else INVALID_TOPIC_EXCEPTION.
ADMIN_CLIENT_ID = "__admin_client"
_PARTITION_FIXED = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_INT64 = struct.Struct(">q")


class Services(HasCatalogue, HasReplicas, HasTransactionVerifier, HasSecurity, Protocol): ...


class ProduceRequest:
    __slots__ = ("acks", "timeout_ms", "topics", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topics: list[tuple[str | None, uuid.UUID | None, list[tuple[int, memoryview | None]]]]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topics = topics


def decode_request(frame: memoryview, offset: int, version: int) -> ProduceRequest:
    reader = Reader(frame, offset, version >= FIRST_FLEXIBLE)
    try:
        transactional_id = reader.nullable_string()
        acks = reader.int16()
        timeout_ms = reader.int32()
        topics = []
        for _ in range(max(reader.array_length(), 0)):
            if version >= FIRST_TOPIC_ID:
                name, topic_id = None, reader.uuid()
            else:
                name, topic_id = reader.nullable_string(), None
            partitions = []
            for _p in range(max(reader.array_length(), 0)):
                index = reader.int32()
                records = reader.nullable_bytes()
                reader.skip_tagged_fields()
                partitions.append((index, records))
            reader.skip_tagged_fields()
            topics.append((name, topic_id, partitions))
        reader.skip_tagged_fields()
    except struct.error as exc:
        raise MalformedRequest(f"truncated produce request: {exc}") from exc
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


async def handle(ctx: RequestContext[Services], request: ProduceRequest) -> object:
    if TRACE.isEnabledFor(DEBUG):
        stage("produce_received", correlation_id=ctx.header.correlation_id, acks=request.acks)
    services = ctx.services
    version = ctx.api_version
    catalogue = services.catalogue
    replica_manager = services.replicas
    results: list[tuple[str | None, uuid.UUID | None, list[tuple[int, ProduceResult]]]] = []
    valid_acks = request.acks in (0, 1, -1)
    resolved = [(name, topic_id, partitions, catalogue.topics_by_id.get(topic_id) if topic_id is not None
                 else catalogue.topics.get(name or "")) for name, topic_id, partitions in request.topics]
    # Kafka's order: the transactional id's WRITE, then each topic's WRITE (an unknown topic the
    # caller may not write is TOPIC_AUTHORIZATION_FAILED too: its existence is not disclosed).
    txn_denied = request.transactional_id is not None and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    denied = denied_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, (
        info.name if info is not None else name for name, _t, _p, info in resolved if info is not None or name))
    refused: dict[tuple[str, int], ProduceResult] = {}
    if request.transactional_id is not None and valid_acks and not txn_denied:
        refused = await _verify_transaction(ctx, request.transactional_id, [
            (info.name, index, records) for _n, _t, partitions, info in resolved
            if info is not None and info.name not in denied for index, records in partitions if records is not None])
    for name, topic_id, partitions, info in resolved:
        missing = ErrorCode.unknown_topic_id if topic_id is not None else ErrorCode.unknown_topic_or_partition
        out = []
        for index, records in partitions:
            if txn_denied:
                result = ProduceResult(ErrorCode.transactional_id_authorization_failed)
            elif denied and (info.name if info is not None else name) in denied:
                result = ProduceResult(ErrorCode.topic_authorization_failed)
            elif info is not None and info.name in INTERNAL_TOPICS and ctx.header.client_id != ADMIN_CLIENT_ID:
                result = ProduceResult(ErrorCode.invalid_topic_exception,
                                       error_message=f"Cannot append to internal topic {info.name}")
            elif not valid_acks:
                result = ProduceResult(ErrorCode.invalid_required_acks)
            elif info is None:
                result = ProduceResult(missing)
            elif records is None:
                result = ProduceResult(ErrorCode.invalid_record, error_message="null records")
            else:
                refusal = refused.get((info.name, index))
                result = refusal if refusal is not None else replica_manager.append_records(
                    info.name, index, records, request.acks)
                BROKER_TOPIC_METRICS.produced(info.name, records, result.error)
            out.append((index, result))
        results.append((name, topic_id, out))
    if request.acks == -1:
        await replica_manager.await_acks([r for _n, _t, out in results for _i, r in out], request.timeout_ms)
    if request.acks == 0:
        return NO_RESPONSE
    if TRACE.isEnabledFor(DEBUG):
        stage("produce_answered", correlation_id=ctx.header.correlation_id)
    error_counts: dict[int, int] = {}
    return EncodedResponse([encode_response(ctx.header.correlation_id, version, results, error_counts)], error_counts)


async def _verify_transaction(ctx: RequestContext[Services], transactional_id: str,
                              batches: list[tuple[str, int, memoryview]]) -> dict[tuple[str, int], ProduceResult]:
    """The refusals (nothing is written for them) of the request's partitions: those whose
    transactional batch the coordinator did not verify. One question for all partitions that
    need one, and every transactional batch must be of one producer id and epoch (Kafka's
    ReplicaManager.appendRecordsWithTransactionVerification)."""
    producers: set[tuple[int, int]] = set()
    asking: dict[tuple[str, int], Partition] = {}
    for topic, index, records in batches:
        if len(records) < HEADER_SIZE:
            continue  # malformed: the append's validation answers
        header = read_header(records)
        if header.magic != 2 or header.producer_id < 0 or not header.is_transactional:
            continue
        producers.add((header.producer_id, header.producer_epoch))
        partition = ctx.services.replicas.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            continue  # the append answers for a partition this broker does not lead
        if not in_transaction(partition, header.producer_id, header.producer_epoch):
            asking[(topic, index)] = partition  # else already verified: the transaction is open here
    if len(producers) > 1:
        return {(topic, index): ProduceResult(ErrorCode.invalid_producer_id_mapping, error_message=(
            "Transactional records contained more than one producer ID")) for topic, index, _r in batches}
    if not asking:
        return {}
    ((producer_id, producer_epoch),) = producers
    version = ctx.api_version
    add = version >= FIRST_ADD_PARTITION
    guards = {tp: verification_guard(partition, producer_id) for tp, partition in asking.items()}
    errors = await ctx.services.transaction_verifier.verify_or_add(
        transactional_id, producer_id, producer_epoch, list(asking), add)
    refused = {}
    for tp, partition in asking.items():
        error = errors.get(tp, ErrorCode.none)
        if error == ErrorCode.none:
            # Kafka's VerificationGuard: a marker for this producer written here while the
            # coordinator was asked ended the transaction the answer was about; appending now
            # would open a transaction no coordinator knows (a hanging transaction).
            if ended_during_verification(partition, producer_id, guards[tp]):
                refused[tp] = ProduceResult(ErrorCode.invalid_txn_state, error_message=(
                    "The transaction ended on this partition while it was being verified"))
            continue
        if error == ErrorCode.transaction_abortable and version < FIRST_ABORTABLE:
            error = ErrorCode.invalid_txn_state
        if error == ErrorCode.invalid_txn_state:
            refused[tp] = ProduceResult(error, error_message="Partition was not added to the transaction")
        elif error in UNVERIFIABLE or (error == ErrorCode.concurrent_transactions and not add):
            refused[tp] = ProduceResult(ErrorCode.not_enough_replicas, error_message=(
                "Unable to verify the partition has been added to the transaction. "
                f"Underlying error: {error.name.upper()}"))
        else:
            refused[tp] = ProduceResult(error)
    return refused


def encode_response(
    correlation_id: int,
    version: int,
    results: list[tuple[str | None, uuid.UUID | None, list[tuple[int, ProduceResult]]]],
    error_counts: dict[int, int] | None = None,
) -> bytes:
    """The answer's frame; each partition's error code is tallied into ``error_counts`` (for
    ErrorsPerSec) on the way."""
    counts = {} if error_counts is None else error_counts
    flexible = version >= FIRST_FLEXIBLE
    w = Writer(flexible, bytearray(b"\x00\x00\x00\x00"))
    w.out += response_header(correlation_id, API_KEY, flexible)
    w.array_length(len(results))
    for name, topic_id, partitions in results:
        if version >= FIRST_TOPIC_ID:
            w.out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            w.nullable_string(name)
        w.array_length(len(partitions))
        for index, r in partitions:
            w.out += _PARTITION_FIXED.pack(index, r.error, r.base_offset, r.log_append_time)
            counts[r.error] = counts.get(r.error, 0) + 1
            if version >= 5:
                w.out += _INT64.pack(r.log_start_offset)
            if version >= 8:
                w.array_length(len(r.record_errors))
                for batch_index, message in r.record_errors:
                    w.out += struct.pack(">i", batch_index)
                    w.nullable_string(message)
                    w.tagged_fields()
                w.nullable_string(r.error_message)
            w.tagged_fields()
        w.tagged_fields()
    w.out += b"\x00\x00\x00\x00"  # throttle_time_ms
    w.tagged_fields()
    struct.pack_into(">i", w.out, 0, len(w.out) - 4)
    return bytes(w.out)
