"""DescribeClientQuotas (key 48), v0–1: ``kafka-configs --describe --entity-type users/clients/ips``.

kbroker stores no client quotas yet (AlterClientQuotas refuses them), so every filter matches
nothing: the answer is Kafka's for a cluster where no quota was ever set, no error and no
entries.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message="", entries=())
