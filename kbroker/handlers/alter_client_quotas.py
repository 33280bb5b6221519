"""AlterClientQuotas (key 49), v0–1: ``kafka-configs --alter --entity-type users/clients/ips``.

Deviation: Kafka stores client quotas in the metadata log and enforces them; kbroker has no
quota store or enforcement yet, so each entry is refused with UNSUPPORTED_VERSION "Client quotas
are not supported by kbroker yet" and nothing is stored (DescribeClientQuotas keeps answering no
entries).
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1
NOT_STORED = "Client quotas are not supported by kbroker yet"


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(
        build(m.EntryData, error_code=ErrorCode.unsupported_version, error_message=NOT_STORED, entity=tuple(
            build(m.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity))
        for entry in request.entries))
