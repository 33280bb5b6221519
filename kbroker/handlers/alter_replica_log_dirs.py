"""AlterReplicaLogDirs (key 34), v1-2: move replicas between this broker's ``log.dirs`` (JBOD).

``kafka-reassign-partitions`` sends it for a plan with explicit ``log_dirs``. Per partition, in
Kafka's order: a destination that is not one of ``log.dirs`` (exact absolute path) is
LOG_DIR_NOT_FOUND, one whose writes are failing (or a log that is offline) KAFKA_STORAGE_ERROR;
a partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION (REPLICA_NOT_AVAILABLE when
the topic exists: the replica is not here yet); otherwise NONE. A replica already in the destination stays; one
moving elsewhere stops that move and starts this one.

The move itself (``storage/log_dir_move.py``) runs as a task on the event loop: the future
log copies the current one a step at a time between requests, and when it has caught up it is
swapped in, in the same step, as the partition's log. Appends and acknowledgements stay with
the current log until then. A future log that cannot be written (ENOSPC, EIO) ends the move:
the future log is removed, the failure is logged and counted against its log dir, and the
replica stays where it was (DescribeLogDirs shows no future replica any more).
With an authorizer the caller needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for
every partition), as Kafka.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.handlers.services import HasCatalogue, HasClock, HasLogDirs, HasReplicas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_dir_move import copy_step
from kbroker.storage.log_manager import FUTURE_SUFFIX, LogManager

log = logging.getLogger(__name__)

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2
# Kafka refuses a move whose future directory name (``<topic>-<p>.<32 hex>-future``) would
# not fit in a file name.
MAX_DIR_NAME = 255
IDLE_WAIT_S = 0.05  # when a step found nothing to copy (the current log is being truncated)

_moves: set[asyncio.Task[None]] = set()  # running moves (the loop keeps only weak references)


class Services(HasLogDirs, HasReplicas, HasCatalogue, HasClock, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    results: dict[str, list[tuple[int, ErrorCode]]] = {}
    authorized = cluster_allowed(ctx, AclOperation.ALTER)
    for target in request.dirs:
        for topic in target.topics:
            for index in topic.partitions:
                error = alter_one(ctx.services, target.path, topic.name, index) if authorized else (
                    ErrorCode.cluster_authorization_failed)
                results.setdefault(topic.name, []).append((index, error))
    return build(
        m.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE,
        results=tuple(
            build(m.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(
                build(m.AlterReplicaLogDirPartitionResult, partition_index=index, error_code=error)
                for index, error in partitions))
            for name, partitions in results.items()
        ),
    )  # fmt: skip


def alter_one(services: Services, path: str, topic: str, index: int) -> ErrorCode:
    log_manager = services.log_manager
    assert isinstance(log_manager, LogManager)
    if len(f"{topic}-{index}.{'0' * 32}{FUTURE_SUFFIX}") > MAX_DIR_NAME:
        return ErrorCode.invalid_topic_exception
    if path not in log_manager.log_dirs:
        return ErrorCode.log_dir_not_found
    if log_manager.health.is_failing(path):
        return ErrorCode.kafka_storage_error
    future_dir = log_manager.future_dir_of(topic, index)
    if future_dir is not None and future_dir != path:
        log_manager.abandon_future(topic, index)  # a new destination replaces the old one
    current = log_manager.logs.get((topic, index))
    if current is None:
        info = services.catalogue.topics.get(topic)
        known = info is not None and 0 <= index < info.partitions
        return ErrorCode.replica_not_available if known else ErrorCode.unknown_topic_or_partition
    if current.offline is not None:
        return ErrorCode.kafka_storage_error  # Kafka: the partition is offline
    if log_manager.dir_of(topic, index) == path or log_manager.future_dir_of(topic, index) == path:
        return ErrorCode.none
    info = services.catalogue.topics.get(topic)
    # partition.metadata holds Kafka's text form of the id: URL-safe base64 without padding
    topic_id = base64.urlsafe_b64encode(info.topic_id.bytes).rstrip(b"=").decode() if info is not None else ""
    try:
        log_manager.create_future(topic, index, path, topic_id)
    except OSError:
        return ErrorCode.kafka_storage_error
    task = asyncio.get_running_loop().create_task(move(services, topic, index), name=f"move {topic}-{index}")
    _moves.add(task)
    task.add_done_callback(_moves.discard)
    return ErrorCode.none


async def move(services: Services, topic: str, index: int) -> None:
    """Copy a step at a time until the future log has caught up, then swap it in."""
    log_manager = services.log_manager
    assert isinstance(log_manager, LogManager)
    tp = (topic, index)
    future = log_manager.future_logs.get(tp)
    while future is not None and log_manager.future_logs.get(tp) is future:
        current = log_manager.logs.get(tp)
        if current is None:
            log_manager.abandon_future(topic, index)
            return
        before = future.log_end_offset
        try:
            if copy_step(current, future, services.clock.wall_ms()):
                moved = log_manager.replace_current_with_future(topic, index)
                partition = services.replicas.partitions.get(tp)
                if partition is not None:
                    partition.log = moved
                return
        except (OSError, KafkaError) as exc:
            log.error("moving %s-%d to %s failed (%s): the replica stays in %s", topic, index, future.log_dir,
                      exc, log_manager.dir_of(topic, index) if tp in log_manager.logs else "?")
            if isinstance(exc, OSError):
                log_manager.health.write_failed(future.log_dir, f"moving {topic}-{index} in", exc)
            if log_manager.future_logs.get(tp) is future:
                log_manager.abandon_future(topic, index)
            return
        await asyncio.sleep(0 if future.log_end_offset != before else IDLE_WAIT_S)
