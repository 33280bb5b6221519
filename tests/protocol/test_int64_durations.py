"""Every int64 duration field of the request schemas kbroker decodes takes any int64, as Kafka
does: kio reads these fields as ``timedelta`` and fails beyond about ±8.6e16 ms; the codec
reads them raw and saturates (tagged_reader)."""

from __future__ import annotations

import datetime
import importlib
import struct
from dataclasses import fields
from typing import Any

import pytest
from kbroker.protocol.codec import decode_request_body, encode_request, parse_request_header, request_schema
from kbroker.protocol.tagged_reader import INT64_DURATION, has_int64_duration
from kio.static.primitive import i32, i64

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
LONGEST = datetime.timedelta(days=999999998, hours=23, minutes=59, seconds=59, milliseconds=999)
SENTINEL_MS = 987_654_321_987
TOPIC = "int64-durations"  # OffsetCommit's topic (end-to-end tests create it)
# (api key, versions, field): every int64 duration of a request schema kio has.
AFFECTED = [(8, (2, 3, 4), "retention_time"), (38, (1, 2, 3), "max_lifetime"), (39, (1, 2), "renew_period"),
            (40, (1, 2), "expiry_time_period")]
FIELDS = [(key, version, name) for key, versions, name in AFFECTED for version in versions]


def sample(key: int, version: int, duration: datetime.timedelta) -> Any:
    """A request of ``key``/``version`` whose int64 duration field is ``duration``."""
    module = importlib.import_module(request_schema(key, version).__module__)  # type: ignore[union-attr]
    if key == 8:
        part = _build(module.OffsetCommitRequestPartition, partition_index=i32(0), committed_offset=i64(3),
                      committed_leader_epoch=i32(-1), committed_metadata="m")
        topic = module.OffsetCommitRequestTopic(name=TOPIC, partitions=(part,))
        return _build(module.OffsetCommitRequest, group_id="g", generation_id_or_member_epoch=i32(-1),
                      generation_id=i32(-1), member_id="", retention_time=duration, topics=(topic,))
    if key == 38:
        return _build(module.CreateDelegationTokenRequest, owner_principal_type=None, owner_principal_name=None,
                      renewers=(), max_lifetime=duration)
    if key == 39:
        return module.RenewDelegationTokenRequest(hmac=b"mac", renew_period=duration)
    return module.ExpireDelegationTokenRequest(hmac=b"mac", expiry_time_period=duration)


def frame_with(key: int, version: int, milliseconds: int) -> bytes:
    """A request frame (no size prefix) carrying ``milliseconds`` in the duration field: encoded
    with a placeholder, then patched, since kio cannot write what a timedelta cannot hold."""
    frame = encode_request(key, version, 1, "t", sample(key, version, datetime.timedelta(milliseconds=SENTINEL_MS)))
    placeholder = struct.pack(">q", SENTINEL_MS)
    assert frame.count(placeholder) == 1
    return frame.replace(placeholder, struct.pack(">q", milliseconds))[4:]


def _build(cls: type, **values: Any) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def test_affected_fields_are_every_int64_duration_kio_has():
    found = set()
    for key in range(100):
        for version in range(20):
            schema = request_schema(key, version)
            if schema is not None and has_int64_duration(schema):
                found |= {(key, version, f.name) for f in fields(schema)
                          if f.metadata.get("kafka_type") == INT64_DURATION}
    assert found == set(FIELDS)


@pytest.mark.parametrize(("key", "version", "name"), FIELDS, ids=[f"{k}v{v}-{n}" for k, v, n in FIELDS])
def test_every_int64_decodes(key: int, version: int, name: str):
    expected = {INT64_MIN: datetime.timedelta.min, INT64_MAX: LONGEST, -1: datetime.timedelta(milliseconds=-1),
                0: datetime.timedelta(0), 10**14: datetime.timedelta(milliseconds=10**14)}
    for milliseconds, duration in expected.items():
        frame = memoryview(frame_with(key, version, milliseconds))
        header, offset = parse_request_header(frame, request_schema(key, version).__flexible__)  # type: ignore[union-attr]
        body = decode_request_body(request_schema(key, version), frame, offset)  # type: ignore[arg-type]
        assert getattr(body, name) == duration, milliseconds
        assert header.api_key == key
