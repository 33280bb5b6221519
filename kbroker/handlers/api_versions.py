"""ApiVersions (key 18), v0–4.

Answers from the node's handler table (``HANDLERS``, or a controller node's own): an API is
listed exactly when it has a handler, with the version range its handler supports. A broker's
table is every API a Kafka 4.3.1 broker listener advertises, at Kafka's ranges; the APIs of
features kbroker has off (ACLs, SASL, delegation tokens, share and streams groups, ...) answer
as Kafka does with the feature off, so clients see a 4.3 broker, not one "too old". An
unsupported ApiVersions version is answered by the dispatcher with UNSUPPORTED_VERSION in v0
framing (KIP-511), as Kafka does.
Features (v3+, KIP-584): the supported ranges are kbroker's (replication/quorum/feature_control.py:
metadata.version 7-30, kraft.version 0-0, transaction.version 0-2, group.version 0-1,
eligible.leader.replicas.version 0-1, share.version 0-0, streams.version 0-0); the finalized
levels and their epoch are the metadata log's as this broker has replayed it (the epoch is the
image's offset, as Kafka's brokers answer), so ``kafka-features upgrade/downgrade`` shows here
once the broker has replayed it.
With transaction.version 2 finalized (the default), clients that know it use KIP-890 part 2
(Produce v12+ / TxnOffsetCommit v5+ instead of AddPartitionsToTxn/AddOffsetsToTxn, EndTxn v5's
epoch bump). As Kafka 4.3, v3 leaves out supported features whose minimum is 0 (v4 lists them).
A controller listener answers from the controller's image
(kbroker/controller_handlers/api_versions.py builds its answer with ``response``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Protocol

from kbroker.handlers.services import HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.feature_control import SUPPORTED

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4
FIRST_FEATURES = 3
FIRST_MIN_ZERO_FEATURES = 4  # Kafka's v0-v3 responses omit features whose min version is 0


class Services(HasCluster, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    epoch, finalized = ctx.services.cluster.finalized_features()
    return response(ctx, epoch, finalized)


def response(ctx: RequestContext[object], epoch: int, finalized: Mapping[str, int]) -> object:
    """The answer listing the APIs of the table this request was dispatched from (a broker's or
    a controller's), kbroker's supported features and the ``finalized`` levels at ``epoch``."""
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
    finalized_keys: tuple = ()
    if version >= FIRST_FEATURES:
        supported = tuple(
            m.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(SUPPORTED.items())
            if low > 0 or version >= FIRST_MIN_ZERO_FEATURES
        )
        finalized_keys = tuple(
            m.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(finalized.items())
        )
    else:
        epoch = -1
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=supported,
        finalized_features_epoch=epoch,
        finalized_features=finalized_keys,
        zk_migration_ready=False,
    )
