"""ConnectionQuotas: max.connections, max.connections.per.ip and its overrides, the protected
inter-broker listener, and the overrides' format."""

from __future__ import annotations

import pytest

from kbroker.network.connection_quotas import ConnectionQuotas, parse_per_ip_overrides, resolve_per_ip_overrides


def test_per_ip_limit_and_override() -> None:
    quotas = ConnectionQuotas(100, 2, {"10.0.0.9": 3}, ["PLAINTEXT"], None)
    assert [quotas.inc("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [quotas.inc("10.0.0.9") for _ in range(4)] == [True, True, True, False]
    assert quotas.total == 5
    quotas.dec("10.0.0.1")
    assert quotas.inc("10.0.0.1")


def test_max_connections_stops_accepting_except_on_the_protected_inter_broker_listener() -> None:
    quotas = ConnectionQuotas(2, 100, {}, ["CLIENTS", "REPLICATION"], "REPLICATION")
    assert quotas.inc("10.0.0.1") and quotas.inc("10.0.0.2")
    assert not quotas.slot_available("CLIENTS")
    assert quotas.slot_available("REPLICATION")
    assert quotas.inc("10.0.0.3") and quotas.exceeded()
    quotas.dec("10.0.0.1")
    quotas.dec("10.0.0.2")
    assert quotas.slot_available("CLIENTS") and not quotas.exceeded()


def test_the_inter_broker_listener_is_protected_only_beside_another_listener() -> None:
    quotas = ConnectionQuotas(1, 100, {}, ["PLAINTEXT"], "PLAINTEXT")
    assert quotas.inc("10.0.0.1")
    assert not quotas.slot_available("PLAINTEXT")


def test_overrides_format() -> None:
    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides("hostName:100, 127.0.0.1:200,[::1]:5") == {
        "hostName": 100, "127.0.0.1": 200, "::1": 5,
    }
    for bad in ("127.0.0.1", "127.0.0.1:", ":5", "host:x", "host:-1"):
        with pytest.raises(ValueError, match="host:count"):
            parse_per_ip_overrides(bad)


def test_overrides_are_resolved_to_addresses_once() -> None:
    resolved = resolve_per_ip_overrides({"localhost": 7, "127.0.0.2": 3})
    assert resolved["127.0.0.1"] == 7 and resolved["127.0.0.2"] == 3
    with pytest.raises(RuntimeError, match=r"max\.connections\.per\.ip\.overrides"):
        resolve_per_ip_overrides({"no-such-host.invalid": 1})
