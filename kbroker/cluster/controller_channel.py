"""LocalControllerClient: a broker's requests to the controller running in its own process.

A combined node (``process.roles=broker,controller``, which is also what kbroker's single node
is) runs a broker and a controller voter in one process. When the active controller is that
local voter, the broker's registration, heartbeats, AlterPartition, producer id blocks and the
admin requests it forwards go straight to the controller's handlers: the same kio requests and
answers as over the network (``InterBrokerClient``, whose interface this shares), with no
socket, no port and no encoding. A single node therefore needs no controller listener.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from kbroker.network.context import RequestContext
from kbroker.network.dispatcher import Dispatcher
from kbroker.protocol.codec import RequestHeader

LOCAL_HOST = "local"


class LocalControllerClient:
    def __init__(self, controller_id: int, dispatcher: Dispatcher[Any], client_id: str) -> None:
        self.controller_id = controller_id
        self.dispatcher = dispatcher  # the local controller's: its handler table and services
        self.client_id = client_id
        self._correlation_ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"LocalControllerClient(controller {self.controller_id})"

    async def request(self, api_key: int, api_version: int, body: Any, timeout_s: float = 30.0) -> Any:
        """Answer ``body`` with the local controller's handler for ``api_key``."""
        handlers = self.dispatcher.handlers
        header = RequestHeader(api_key, api_version, next(self._correlation_ids), self.client_id)
        context = RequestContext(self.dispatcher.services, header, LOCAL_HOST, handlers)
        try:
            return await asyncio.wait_for(handlers[api_key].handle(context, body), timeout_s)
        except TimeoutError:
            raise TimeoutError(f"{self!r}: no response in {timeout_s:.1f} s") from None

    def close(self) -> None:
        """Nothing to release (the interface of InterBrokerClient)."""
