"""DescribeLogDirs (key 35), v1-5.

One result per ``log.dirs`` entry, with the partitions it holds: size on disk (all segment
files), offset lag 0 (the leader is never behind itself) and is_future_key false; a replica
moving here (AlterReplicaLogDirs) is listed too, as Kafka lists it, with is_future_key true and
its lag behind the current log's end. A null topic list means every partition; otherwise only the
named partitions, and those this broker does not host are left out, as Kafka does.
v4+ carry the file system's total and usable bytes; a directory that cannot be read is
reported with KAFKA_STORAGE_ERROR. v5's is_cordoned is always false (no cordoning).
With an authorizer the caller needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED
and no directories), as Kafka.
"""

from __future__ import annotations

import os
from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.handlers.services import HasLogDirs
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


class Services(HasLogDirs, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    log_manager = ctx.services.log_manager
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return build(m.DescribeLogDirsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, results=())
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    # dir -> topic -> (partition, size, offset lag, is future)
    by_dir: dict[str, dict[str, list[tuple[int, int, int, bool]]]] = {d: {} for d in log_manager.log_dirs}
    for (topic, index), plog in sorted(log_manager.logs.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        directory = log_manager.dir_of(topic, index)
        by_dir.setdefault(directory, {}).setdefault(topic, []).append((index, plog.size_in_bytes, 0, False))
        future = log_manager.future_logs.get((topic, index))
        if future is not None:
            by_dir.setdefault(future.log_dir, {}).setdefault(topic, []).append(
                (index, future.size_in_bytes, max(plog.log_end_offset - future.log_end_offset, 0), True))
    results = []
    for directory, topics in by_dir.items():
        error, total, usable = ErrorCode.none, -1, -1
        try:
            stats = os.statvfs(directory)
            total, usable = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
        except OSError:
            error, topics = ErrorCode.kafka_storage_error, {}
        results.append(build(
            m.DescribeLogDirsResult,
            error_code=error,
            log_dir=directory,
            topics=tuple(
                build(m.DescribeLogDirsTopic, name=name, partitions=tuple(
                    build(
                        m.DescribeLogDirsPartition, partition_index=index, partition_size=size,
                        offset_lag=lag, is_future_key=future,
                    )
                    for index, size, lag, future in partitions
                ))
                for name, partitions in topics.items()
            ),
            total_bytes=total,
            usable_bytes=usable,
            is_cordoned=False,
        ))
    return build(
        m.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=tuple(results),
    )
