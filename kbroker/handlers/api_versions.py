"""ApiVersions (key 18), v0–4.

Answers from ``HANDLERS``: an API is listed exactly when kbroker implements it, with the
version range its handler supports. An unsupported ApiVersions version is answered by the
dispatcher with UNSUPPORTED_VERSION in v0 framing (KIP-511), as Kafka does.
Deviation: no supported/finalized features are advertised yet (Kafka lists metadata.version,
transaction.version, group.version, …); clients then use their pre-feature behaviour.
"""

from __future__ import annotations

import datetime

from kbroker.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: object) -> object:
    from kbroker.handlers import HANDLERS  # the table includes this module

    m = response_module(API_KEY, ctx.api_version)
    keys = tuple(
        m.ApiVersion(
            api_key=key,
            min_version=getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION),
            max_version=h.MAX_VERSION,
        )
        for key, h in sorted(HANDLERS.items())
    )
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
