"""What a handler receives besides its request: the services its node lends it, the request
header, and the handler table the request was answered from.

``RequestContext`` is generic over the services: a broker's handlers see the narrow protocols of
``kbroker/handlers/services.py``, a controller's those of ``kbroker/controller_handlers/services.py``;
this module knows neither, so the wire layer depends on no handler and no node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Generic, TypeVar

from kbroker.protocol.codec import RequestHeader
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal
from kbroker.storage.log import FetchSlice

# Covariant: a context carrying a node's whole services object is a context for a handler that
# declares only the few services it uses.
S_co = TypeVar("S_co", covariant=True)


@dataclass(slots=True, frozen=True)
class RequestContext(Generic[S_co]):
    services: S_co
    header: RequestHeader
    client_host: str
    handlers: Mapping[int, ModuleType]  # the table this request was dispatched from (ApiVersions lists it)
    # The connection the request came on (its peer address, which Dispatcher.peer_closed names
    # when the peer closes it); None for a request answered in process.
    connection: str | None = None
    # Who sent it (authenticated on the connection: TLS certificate or SASL) and on which listener
    # (its name, e.g. "PLAINTEXT"; "" for a request answered in process): what ACLs and quotas see.
    principal: KafkaPrincipal = ANONYMOUS
    listener: str = ""

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(slots=True)
class EncodedResponse:
    """A response encoded by its handler: frame bytes and segment ranges, sent in order.

    The first chunk starts with the 4-byte size prefix covering every chunk. ``error_counts``:
    how many times each error code is in the answer, top level and per partition (Kafka's
    ``AbstractResponse.errorCounts``, which its ErrorsPerSec meters count), tallied while encoding.
    """

    chunks: list[bytes | FetchSlice]
    error_counts: dict[int, int] | None = None


class NoResponse:
    """Produce with acks=0: Kafka sends nothing back."""


NO_RESPONSE = NoResponse()


@dataclass(slots=True)
class ThrottledResponse:
    """The response to a client over a quota (kbroker/quotas): sent at once, then the connection
    reads nothing from that client for ``throttle_ms`` (Kafka's muted channel, KIP-219)."""

    response: object
    throttle_ms: int
