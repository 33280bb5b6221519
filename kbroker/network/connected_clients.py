"""ConnectedClients: who is connected to this node, as the web console's "clients" view shows it.

One entry per connection (its peer address): the listener and principal it authenticated as, the
client id of its last request, the software name and version it sent in ApiVersions v3+
(KIP-511), and each API it has used with the versions it used. The Dispatcher notes every
request here (one dict lookup and one set insertion); the SocketServer drops a connection's
entry when the connection closes, whichever side closed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.security.principal import KafkaPrincipal

API_VERSIONS_KEY = 18


@dataclass(slots=True)
class ConnectedClient:
    peer: str
    listener: str
    principal: str
    client_id: str = ""
    software_name: str = ""
    software_version: str = ""
    api_versions: set[tuple[int, int]] = field(default_factory=set)  # (api key, version) used


class ConnectedClients:
    def __init__(self) -> None:
        self._by_peer: dict[str, ConnectedClient] = {}

    def note(self, peer: str, listener: str, principal: KafkaPrincipal, client_id: str | None, api_key: int,
             api_version: int, request: object) -> None:
        """Record one request of the connection ``peer`` (called by the Dispatcher)."""
        client = self._by_peer.get(peer)
        if client is None:
            client = self._by_peer[peer] = ConnectedClient(peer, listener, str(principal))
        client.client_id = client_id or ""
        client.api_versions.add((api_key, api_version))
        if api_key == API_VERSIONS_KEY and api_version >= 3:
            client.software_name = getattr(request, "client_software_name", "") or ""
            client.software_version = getattr(request, "client_software_version", "") or ""

    def client(self, peer: str) -> ConnectedClient | None:
        """The connection ``peer``'s entry (its software for KIP-714 telemetry), None if unseen."""
        return self._by_peer.get(peer)

    def forget(self, peer: str) -> None:
        """The connection ``peer`` closed (called by its SocketServer)."""
        self._by_peer.pop(peer, None)

    def connected(self) -> list[ConnectedClient]:
        """The clients connected now, by client id."""
        return sorted(self._by_peer.values(), key=lambda c: (c.client_id, c.peer))
