"""ConnectionQuotas: ``max.connections``, ``max.connections.per.ip`` and its overrides.

Kafka's semantics, counted per socket server (a node's broker listeners and its controller
listeners are counted apart, as Kafka's broker and controller have a socket server each):

- ``max.connections`` is broker-wide: once that many connections are open, listeners stop
  accepting (new clients wait in the listen backlog) until one closes. The inter-broker
  listener is exempt when the server has other listeners too; a connection accepted there
  beyond the limit closes the least recently active connection of another listener.
- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``):
  a connection from an address that already has its maximum is accepted and closed at once.
"""

from __future__ import annotations

import socket


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int],
                 listeners: list[str], inter_broker_listener: str | None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = per_ip_overrides
        self.total = 0
        self.per_ip: dict[str, int] = {}
        # Kafka's rule: the inter-broker listener is protected only if there is another listener.
        self.protected_listener = inter_broker_listener if len(set(listeners)) > 1 else None

    def slot_available(self, listener: str) -> bool:
        """May ``listener`` accept one more connection now?"""
        return listener == self.protected_listener or self.total < self.max_connections

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    def inc(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (and not counted) if ``ip`` is at its limit."""
        count = self.per_ip.get(ip, 0)
        if count >= self.limit_for(ip):
            return False
        self.per_ip[ip] = count + 1
        self.total += 1
        return True

    def dec(self, ip: str) -> None:
        count = self.per_ip[ip] - 1
        if count:
            self.per_ip[ip] = count
        else:
            del self.per_ip[ip]
        self.total -= 1

    def exceeded(self) -> bool:
        """More connections than ``max.connections`` (possible through the protected listener)."""
        return self.total > self.max_connections


def parse_per_ip_overrides(value: str) -> dict[str, int]:
    """``host:count,...`` as written (the last colon separates the count, so IPv6 works);
    raises ValueError if an item is malformed."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        if not colon or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"expected host:count, got {item!r}")
        out[host.strip().strip("[]")] = int(count)
    return out


def resolve_per_ip_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """The overrides keyed by IP address: each host name is resolved once, at start-up (as
    Kafka does), to every address it has."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise RuntimeError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        for info in infos:
            out[str(info[4][0])] = count
    return out
