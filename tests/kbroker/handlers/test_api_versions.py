"""ApiVersions: the advertised table is Kafka 4.3.1's, locked."""

from __future__ import annotations

import socket
import struct

from kafka.admin import KafkaAdminClient

# Every API Kafka 4.3.1 advertises on a broker listener, at its ranges (read from a Kafka 4.3.1
# broker's ApiVersions v4 answer): kbroker advertises the same table, answering the APIs of
# features it has off as Kafka does with them off (Produce lists v0-2 as Kafka 4 does, for
# librdkafka's compression check, but rejects them).
EXPECTED = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2),
    28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2),
    44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0),
    55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 80: (0, 1),
    81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 0), 89: (0, 0),
    90: (0, 1), 91: (0, 0), 92: (0, 0),
}


def api_versions_raw(bootstrap: str, version: int) -> bytes:
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        body = struct.pack(">hhih", 18, version, 42, 4) + b"test"
        if version >= 3:
            body += b"\x00" + b"\x05kbro" + b"\x020" + b"\x00"  # header tags; name; version; tags
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return sock.recv(size, socket.MSG_WAITALL)


def test_advertised_table_is_kafkas(broker):
    raw = api_versions_raw(broker.bootstrap, 0)
    correlation_id, error, count = struct.unpack_from(">ihi", raw, 0)
    assert (correlation_id, error) == (42, 0)
    table = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", raw, 10 + 6 * i)
        table[key] = (low, high)
    assert table == EXPECTED


def test_unsupported_version_answers_35_in_v0_framing(broker):
    raw = api_versions_raw(broker.bootstrap, 99)
    assert raw == struct.pack(">ihihhh", 42, 35, 1, 18, 0, 4)


def test_flexible_v3_and_a_real_client_negotiate(broker):
    raw = api_versions_raw(broker.bootstrap, 3)
    assert struct.unpack_from(">ih", raw, 0) == (42, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin.describe_cluster()["controller_id"] == 1
    finally:
        admin.close()


def test_features_are_finalized_at_their_highest_level_like_a_formatted_kafka(broker):
    """As Kafka 4.3.1 answers after ``kafka-storage format``: v3 leaves out supported features
    whose minimum is 0, v4 lists them; both finalize every feature kbroker supports at its
    highest level (metadata.version 4.3-IV0 = 30), at the epoch of the metadata offset."""
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    for version in (3, 4):
        raw = api_versions_raw(broker.bootstrap, version)  # response header v0, as KIP-511 says
        response, _size = entity_reader(load_response_schema(18, version))(memoryview(raw), 4)
        assert response.error_code == 0
        supported = [(f.name, f.min_version, f.max_version) for f in response.supported_features]
        assert supported == [
            ("eligible.leader.replicas.version", 0, 1), ("group.version", 0, 1), ("kraft.version", 0, 0),
            ("metadata.version", 7, 30), ("share.version", 0, 0), ("streams.version", 0, 0),
            ("transaction.version", 0, 2),
        ] if version == 4 else [("metadata.version", 7, 30)]
        finalized = [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features]
        assert finalized == [("eligible.leader.replicas.version", 1, 1), ("group.version", 1, 1),
                             ("metadata.version", 30, 30), ("transaction.version", 2, 2)]
        assert response.finalized_features_epoch > 0
