"""TxnOffsetCommit (key 28), v0–5.

Offsets consumed inside a transaction (``send_offsets_to_transaction``) are written to the
group's ``__consumer_offsets`` partition as transactional records under the producer's id
and epoch, and become visible in the OffsetStore only when the transaction commits.
Up to v4 the transaction must be ongoing with that partition added (AddOffsetsToTxn), else
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4, as Kafka's KIP-890 verification); v5+
(transaction version 2) adds the offsets partition to the transaction itself, as Kafka's
group coordinator does through AddPartitionsToTxnManager.
Producer id/epoch errors as AddPartitionsToTxn. v3+ generation id / member id / group.instance.id
are checked by the GroupCoordinator as Kafka does for transactional commits (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); without them (generation -1) any group accepts the commit.
This broker is the group's coordinator, not necessarily the transactional id's:
the offsets partition is verified (v0-4) or added (v5+) by asking the transaction coordinator
(AddPartitionsToTxnManager, as Kafka's group coordinator does), and the commit is answered once
the ISR has it (COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR otherwise, as OffsetCommit).
With an authorizer, as Kafka: WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetAndMetadata
from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasClassicGroups, HasClock, HasGroupOffsets, HasReplicas, HasTransactionVerifier
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.transactions.verification import ended_during_verification, in_transaction, verification_guard

from .txn_errors import for_version

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5
FIRST_ABORTABLE = 4
FIRST_ADD_PARTITION = 5
COMMIT_TIMEOUT_MS = 30000


class Services(HasClassicGroups, HasGroupOffsets, HasReplicas, HasTransactionVerifier, HasClock, HasSecurity,
               Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    now_ms = ctx.services.clock.wall_ms()
    offsets = {
        (t.name, p.partition_index): OffsetAndMetadata(
            p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "", now_ms)
        for t in request.topics for p in t.partitions
    }
    # Kafka's checks: WRITE on the transactional id, READ on the group (each refuses every
    # partition), then READ on each topic (refused topics answered, the rest committed).
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(m, request, ErrorCode.transactional_id_authorization_failed)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(m, request, ErrorCode.group_authorization_failed)
    denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    if denied:
        offsets = {tp: o for tp, o in offsets.items() if tp[0] not in denied}
    error = await _commit(ctx, request, offsets) if offsets else ErrorCode.none
    return _response(m, request, error, denied)


async def _commit(ctx: RequestContext[Services], request: object, offsets: dict) -> ErrorCode:
    services = ctx.services
    group = request.group_id
    if services.classic_groups.coordinator_error(group):
        return services.classic_groups.coordinator_error(group)
    tp = (CONSUMER_OFFSETS_TOPIC, services.group_offsets.partition_for(group))
    partition = services.replicas.partitions.get(tp)
    if partition is None:
        return ErrorCode.not_coordinator
    error = ErrorCode.none
    if not in_transaction(partition, request.producer_id, request.producer_epoch):
        guard = verification_guard(partition, request.producer_id)
        errors = await services.transaction_verifier.verify_or_add(
            request.transactional_id, request.producer_id, request.producer_epoch, [tp],
            ctx.api_version >= FIRST_ADD_PARTITION)
        error = errors[tp]
        if error == ErrorCode.none and ended_during_verification(partition, request.producer_id, guard):
            error = ErrorCode.invalid_txn_state  # the transaction ended meanwhile (Kafka's VerificationGuard)
    if error == ErrorCode.transaction_abortable and ctx.api_version < FIRST_ABORTABLE:
        error = ErrorCode.invalid_txn_state
    elif error in (ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress):
        error = ErrorCode.coordinator_not_available  # retriable for every client
    if error != ErrorCode.none:
        return for_version(error, ctx.api_version)
    try:
        services.classic_groups.validate_commit(
            group, getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None), ctx.api_version, transactional=True)
        services.group_offsets.commit_transactional(group, request.producer_id, request.producer_epoch, offsets)
    except KafkaError as exc:
        return for_version(exc.code, ctx.api_version)
    except OSError as exc:
        return coordinator_write_error(exc)
    return await services.group_offsets.wait_replicated(group, COMMIT_TIMEOUT_MS)


def _response(m: object, request: object, error: ErrorCode, denied: frozenset[str] = frozenset()) -> object:
    topics = tuple(
        build(m.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(m.TxnOffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=ErrorCode.topic_authorization_failed if t.name in denied else error)
            for p in t.partitions))
        for t in request.topics
    )
    return build(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
