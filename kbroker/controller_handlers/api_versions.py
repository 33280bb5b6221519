"""ApiVersions (key 18), v0–4, on the controller listener: the controller's APIs and features.

The same answer as a broker's (kbroker/handlers/api_versions.py: the table this request came
through, kbroker's supported features), with the finalized levels of the controller's image,
so ``kafka-features --bootstrap-controller describe`` works. Deviation: a voter that is not
the active controller does not replay the metadata log, so it reports the levels of the image
it last led with (none if it never led), where Kafka's standby controllers report the log's.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasQuorumController
from kbroker.handlers import api_versions
from kbroker.network.context import RequestContext

API_KEY = api_versions.API_KEY
MIN_VERSION = api_versions.MIN_VERSION
MAX_VERSION = api_versions.MAX_VERSION


class Services(HasQuorumController, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    image = ctx.services.controller.image
    return api_versions.response(ctx, image.offset, image.features)
