"""What a handler receives besides its request: the broker's parts and the request header."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.protocol.codec import RequestHeader
from kbroker.storage.log import FetchSlice

if TYPE_CHECKING:
    from kbroker.node.broker import Broker
    from kbroker.node.controller_node import ControllerNode


@dataclass(slots=True, frozen=True)
class RequestContext:
    broker: Broker | ControllerNode  # the node serving the request
    header: RequestHeader
    client_host: str

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(slots=True)
class EncodedResponse:
    """A response encoded by its handler: frame bytes and segment ranges, sent in order.

    The first chunk starts with the 4-byte size prefix covering every chunk.
    """

    chunks: list[bytes | FetchSlice]


class NoResponse:
    """Produce with acks=0: Kafka sends nothing back."""


NO_RESPONSE = NoResponse()
