"""ApiVersions (key 18), v0–4, on the controller listener: the controller's APIs and features.

The same answer as a broker's (kbroker/handlers/api_versions.py: the table this request came
through, kbroker's supported features), with the finalized levels of this voter's image of the
committed metadata log at its offset — on every voter, active or not, as Kafka's controllers
answer — so ``kafka-features --bootstrap-controller describe`` works whichever voter it asks.
A voter that has no image yet (it is still starting) reports none, at epoch -1.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasCommittedImage
from kbroker.handlers import api_versions
from kbroker.network.context import RequestContext

API_KEY = api_versions.API_KEY
MIN_VERSION = api_versions.MIN_VERSION
MAX_VERSION = api_versions.MAX_VERSION


class Services(HasCommittedImage, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    image = ctx.services.committed_image
    if image is None:
        return api_versions.response(ctx, -1, {})
    return api_versions.response(ctx, image.offset, image.features)
