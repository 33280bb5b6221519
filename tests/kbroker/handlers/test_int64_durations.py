"""Requests carrying INT64_MIN / INT64_MAX in an int64 duration field get Kafka 4.3.1's answer
(seen side by side with the same frames): OffsetCommit v2-4 retention_time_ms commits (NONE),
the delegation-token APIs answer DELEGATION_TOKEN_AUTH_DISABLED; before, kbroker closed the
connection (its message library cannot read such values)."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.codec import decode_response

from tests.broker_process import BrokerProcess
from tests.protocol.test_int64_durations import FIELDS, INT64_MAX, INT64_MIN, TOPIC, frame_with

DELEGATION_TOKEN_AUTH_DISABLED = 64
EXTREMES = (INT64_MIN, INT64_MAX)


@pytest.fixture(scope="module", autouse=True)
def topic(cadmin: AdminClient) -> None:
    """The topic the OffsetCommit requests commit to (Kafka refuses unknown topics)."""
    for future in cadmin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(10)


def exchange(broker: BrokerProcess, frame: bytes) -> bytes:
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        head = sock.recv(4, socket.MSG_WAITALL)
        assert len(head) == 4, "the broker closed the connection"
        return sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)


@pytest.mark.parametrize(("key", "version", "name"), FIELDS, ids=[f"{k}v{v}-{n}" for k, v, n in FIELDS])
def test_extreme_durations_get_kafkas_answer(broker: BrokerProcess, key: int, version: int, name: str):
    for milliseconds in EXTREMES:
        answer = exchange(broker, frame_with(key, version, milliseconds))
        if key == 8:
            _cid, response = decode_response(key, version, answer)
            assert [p.error_code for t in response.topics for p in t.partitions] == [0], milliseconds
        else:  # error_code leads the body; kio cannot read these responses' -1 timestamps
            body = 5 if version >= 2 else 4  # response header v1 (flexible) has a tagged-field byte
            assert struct.unpack_from(">h", answer, body)[0] == DELEGATION_TOKEN_AUTH_DISABLED, milliseconds
