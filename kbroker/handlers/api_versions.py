"""ApiVersions (key 18), v0–4.

Answers from the node's handler table (``HANDLERS``, or a controller node's own): an API is
listed exactly when kbroker implements it, with the version range its handler supports. An
unsupported ApiVersions version is answered by the dispatcher with UNSUPPORTED_VERSION in v0
framing (KIP-511), as Kafka does.
Features (v3+, KIP-584): ``transaction.version`` is supported 0–2 and finalized at level 2
(KIP-890 part 2: clients that know it drop AddPartitionsToTxn/AddOffsetsToTxn for Produce v12+
/ TxnOffsetCommit v5+ and use EndTxn v5's epoch bump). As Kafka 4.3, v3 leaves out supported
features whose minimum is 0 (v4 lists them). The finalized features epoch is a constant: the
finalized set never changes while kbroker runs.
Deviation: metadata.version, group.version and the other features Kafka lists are not
advertised (nothing here depends on them).
"""

from __future__ import annotations

import datetime

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4
FIRST_FEATURES = 3
FIRST_MIN_ZERO_FEATURES = 4  # Kafka's v0-v3 responses omit features whose min version is 0
SUPPORTED_FEATURES = {"transaction.version": (0, 2)}
FINALIZED_FEATURES = {"transaction.version": 2}
FINALIZED_FEATURES_EPOCH = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    # No service: the APIs listed are the table this request was dispatched from (a broker's or a controller's).
    m = response_module(API_KEY, ctx.api_version)
    keys = tuple(
        m.ApiVersion(
            api_key=key,
            min_version=getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION),
            max_version=h.MAX_VERSION,
        )
        for key, h in sorted(ctx.handlers.items())
    )
    version = ctx.api_version
    supported: tuple = ()
    finalized: tuple = ()
    epoch = -1
    if version >= FIRST_FEATURES:
        supported = tuple(
            m.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in SUPPORTED_FEATURES.items()
            if low > 0 or version >= FIRST_MIN_ZERO_FEATURES
        )
        finalized = tuple(
            m.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in FINALIZED_FEATURES.items()
        )
        epoch = FINALIZED_FEATURES_EPOCH
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=supported,
        finalized_features_epoch=epoch,
        finalized_features=finalized,
        zk_migration_ready=False,
    )
