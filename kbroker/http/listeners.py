"""Parsing of ``kbroker.http.listeners``: ``http://HOST:PORT[,http://HOST:PORT...]``.

Kept free of aiohttp so the configuration check (kbroker/config/kafka_config.py) can use it
without importing the web stack. An empty value means no HTTP listener.
"""

from __future__ import annotations

HTTP_LISTENERS_KEY = "kbroker.http.listeners"


def parse_http_listeners(raw: str) -> list[tuple[str, int]]:
    """(host, port) per listener; an empty host means every interface. ValueError names the
    item that is not ``http://host:port``."""
    out = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        scheme, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if scheme.lower() != "http" or not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"Invalid value {item} for configuration {HTTP_LISTENERS_KEY}: expected http://host:port")
        out.append((host.strip("[]"), int(port)))
    return out
