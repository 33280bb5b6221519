"""AlterUserScramCredentials (key 51), v0: ``kafka-configs --alter --entity-type users
--add-config SCRAM-SHA-256=[...]``.

Deviation: Kafka stores SCRAM credentials in the metadata log even where no listener uses SASL;
kbroker has no credential store yet (the security issue, #18, adds it), so each user of the
request is refused with UNSUPPORTED_VERSION "SCRAM credentials are not supported by kbroker
yet" and nothing is stored (DescribeUserScramCredentials keeps answering no users).
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0
NOT_STORED = "SCRAM credentials are not supported by kbroker yet"


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AlterUserScramCredentialsResult, user=user, error_code=ErrorCode.unsupported_version,
              error_message=NOT_STORED)
        for user in users))
