"""Dispatcher: turns one request frame into one response, via the API's handler.

Admin APIs whose module declares ``FORWARD_TO_CONTROLLER`` are sent unchanged to the active
controller (one rule, as Kafka's ``maybeForwardToController``). Protocol errors are answered the
way Kafka answers them: an ApiVersions request of a version
we don't support gets an UNSUPPORTED_VERSION answer in v0 framing (so the client can retry
lower); an unknown API key, any other unsupported version or a frame that cannot be decoded
closes the connection. A handler failing unexpectedly is logged with the request's context
and the connection is closed (the client reconnects and retries). These messages can repeat
for every request, so they are rate-limited (RateLimitedLogger).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kbroker.network.connected_clients import ConnectedClients
from kbroker.network.context import NO_RESPONSE, EncodedResponse, RequestContext, ThrottledResponse
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.codec import (
    API_VERSIONS_KEY,
    MalformedRequest,
    decode_request_body,
    encode_response,
    is_flexible,
    parse_request_header,
    request_schema,
)
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.stage_trace import DEBUG, TRACE, stage
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kbroker.quotas.client_quotas import ClientQuotas

log = logging.getLogger(__name__)
_limited = RateLimitedLogger(log)

S = TypeVar("S")
# (api key, api version, request) -> the active controller's answer, None if it did not answer
ForwardToController = Callable[[int, int, object], Awaitable[object | None]]
# Told of every answered request: (handler, api key, api version, request, response, the
# time.perf_counter() it was dispatched at, its context) -- the request metrics and request log.
RequestObserver = Callable[[ModuleType, int, int, object, object, float, "RequestContext[Any]"], None]


def unsupported_api_versions_response(correlation_id: int, handler: ModuleType) -> bytes:
    """ApiVersions v0 body: UNSUPPORTED_VERSION plus our own ApiVersions range (KIP-511)."""
    body = struct.pack(
        ">ihihhh", correlation_id, ErrorCode.unsupported_version.value, 1,
        API_VERSIONS_KEY, handler.MIN_VERSION, handler.MAX_VERSION,
    )
    return struct.pack(">i", len(body)) + body


class Dispatcher(Generic[S]):
    """Answers requests from one handler table (a broker's, or a controller's smaller one) with
    the services that node lends its handlers; ``forward`` reaches the active controller for the
    modules that declare ``FORWARD_TO_CONTROLLER``."""

    def __init__(self, services: S, handlers: Mapping[int, ModuleType], forward: ForwardToController | None = None,
                 ready: asyncio.Event | None = None, on_peer_closed: Callable[[str], None] | None = None,
                 quotas: ClientQuotas | None = None) -> None:
        self.services = services
        self.handlers = handlers
        self.forward = forward
        # Set once the node may serve requests: until then a request waits (its connection was
        # accepted), as Kafka's broker processes none before it is unfenced.
        self.ready = ready
        # Told the peer address of each connection its peer closed (end of file or reset), for a
        # node that tracks who is connected (the controller's broker sessions).
        self.on_peer_closed = on_peer_closed
        # A broker's client quotas: once any is configured, requests are answered through them.
        self.quotas = quotas
        # Who is connected and what they use (the web console's clients view).
        self.clients = ConnectedClients()
        # Set when the node exports metrics (kbroker/metrics/request_metrics.py); None costs one check.
        self.observer: RequestObserver | None = None

    def peer_closed(self, peer: str) -> None:
        """The peer closed the connection whose requests carried ``RequestContext.connection == peer``."""
        if self.on_peer_closed is not None:
            self.on_peer_closed(peer)

    async def dispatch(self, frame: bytearray, client_host: str, peer: str, principal: KafkaPrincipal = ANONYMOUS,
                       listener: str = "") -> bytes | EncodedResponse | object | None:
        """The encoded response, NO_RESPONSE (acks=0), or None to close the connection; the request
        comes from ``principal`` on ``listener`` (as its connection authenticated it)."""
        if self.ready is not None and not self.ready.is_set():
            await self.ready.wait()
        started = time.perf_counter()
        view = memoryview(frame)
        try:
            if len(view) < 8:
                raise MalformedRequest("frame shorter than a request header")
            api_key, api_version, correlation_id = struct.unpack_from(">hhi", view, 0)
            handler = self.handlers.get(api_key)
            if handler is None:
                _limited.info("closing %s: unknown API key %d", peer, api_key)
                return None
            if not handler.MIN_VERSION <= api_version <= handler.MAX_VERSION:
                if api_key == API_VERSIONS_KEY:
                    return unsupported_api_versions_response(correlation_id, handler)
                _limited.info("closing %s: %s v%d is not supported", peer, handler.__name__, api_version)
                return None
            schema = request_schema(api_key, api_version)
            assert schema is not None, f"handler advertises a version kio lacks: {api_key} v{api_version}"
            header, offset = parse_request_header(view, is_flexible(api_key, api_version))
            if hasattr(handler, "decode_request"):
                request = handler.decode_request(view, offset, api_version)
            else:
                request = decode_request_body(schema, view, offset)
        except MalformedRequest as exc:
            _limited.info("closing %s: malformed request: %s", peer, exc)
            return None
        if TRACE.isEnabledFor(DEBUG):
            stage("request_received", api_key=api_key, correlation_id=correlation_id, peer=peer)
        context = RequestContext(self.services, header, client_host, self.handlers, peer, principal, listener)
        self.clients.note(peer, listener, principal, header.client_id, api_key, api_version, request)
        try:
            if getattr(handler, "FORWARD_TO_CONTROLLER", False):
                # Some forwarded requests the broker answers itself (an unauthorized caller, a
                # feature that is off), as Kafka's KafkaApis checks before it forwards.
                local = handler.answer_locally(context, request) if hasattr(handler, "answer_locally") else None
                response = local if local is not None else await self._forward(handler, api_key, api_version, request)
            elif self.quotas is not None and self.quotas.configured():
                response = await self.quotas.handle(handler, context, request, len(frame))
            else:
                response = await handler.handle(context, request)
        except Exception:
            _limited.log(
                logging.ERROR, "unexpected error handling %s v%d (correlation id %d) from %s (client id %r)",
                handler.__name__.rsplit(".", 1)[-1], api_version, correlation_id, peer, header.client_id,
                exc_info=True,
            )
            return None
        if TRACE.isEnabledFor(DEBUG):
            stage("request_handled", api_key=api_key, correlation_id=correlation_id, peer=peer)
        if self.observer is not None:
            self.observer(handler, api_key, api_version, request, response, started, context)
        if response is NO_RESPONSE or isinstance(response, EncodedResponse):
            return response
        if isinstance(response, ThrottledResponse):  # encoded here; the connection mutes the client
            if response.response is not NO_RESPONSE and not isinstance(response.response, EncodedResponse):
                response.response = encode_response(correlation_id, api_key, response.response)
            return response
        return encode_response(correlation_id, api_key, response)

    async def _forward(self, handler: ModuleType, api_key: int, api_version: int, request: object) -> object:
        """Kafka's ``maybeForwardToController``: an admin request the controller decides goes
        there unchanged; no answer from it is the API's REQUEST_TIMED_OUT response."""
        assert self.forward is not None, f"{handler.__name__} is forwarded, but this node forwards nothing"
        answer = await self.forward(api_key, api_version, request)
        return answer if answer is not None else handler.error_response(api_version, ErrorCode.request_timed_out)
