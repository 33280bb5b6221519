"""The web console: static pages (plain HTML, CSS and JavaScript, no build step, no CDN) served at
``/`` and ``/console/``, reading the JSON API of ``kbroker.http.api``. ``register`` is the seam
``kbroker.http.app.build_app`` calls when this package is installed."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from kbroker.http.api import routes
from kbroker.http.app import NodeServices

STATIC = Path(__file__).with_name("static")


async def _index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


def register(app: web.Application, services: NodeServices) -> None:
    """Add the console's pages and its API to the node's application (``services`` is already
    stored in the app; the routes read it there at request time)."""
    del services
    app.router.add_get("/", _index)
    app.router.add_static("/console/", STATIC)
    routes.register(app)
