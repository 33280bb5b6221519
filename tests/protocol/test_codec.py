"""The generic codec: headers, unknown tagged fields (KIP-482), version-superset building."""

from __future__ import annotations

import io
import struct

import pytest
from kbroker.protocol.codec import (
    MalformedRequest,
    build,
    decode_request_body,
    parse_request_header,
    request_schema,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_writer


def frame_for(api_key: int, version: int, body: bytes, client_id: str = "cli") -> memoryview:
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id.encode() + b"\x00"
    return memoryview(bytearray(header + body))


def encode(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_flexible_header_and_body_decode():
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="orders"),),  # kio reads the zero UUID as None
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    frame = frame_for(3, 12, encode(request))
    header, offset = parse_request_header(frame, flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 7, "cli")
    assert decode_request_body(request_schema(3, 12), frame, offset) == request


def test_unknown_tagged_fields_are_skipped_not_rejected():
    request = MetadataRequest(topics=None, allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False)
    body = encode(request)
    assert body.endswith(b"\x00")
    with_unknown_tag = body[:-1] + bytes([1, 42, 3]) + b"abc"  # one tag 42, 3 bytes
    frame = frame_for(3, 12, with_unknown_tag)
    _header, offset = parse_request_header(frame, flexible=True)
    assert decode_request_body(request_schema(3, 12), frame, offset) == request


def test_unknown_tags_in_the_header_are_skipped():
    body = encode(MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                  include_topic_authorized_operations=False))
    raw = struct.pack(">hhih", 3, 12, 9, 1) + b"x" + bytes([1, 5, 2]) + b"zz" + body
    header, offset = parse_request_header(memoryview(bytearray(raw)), flexible=True)
    assert header.correlation_id == 9
    assert raw[offset:] == body


def test_truncated_body_is_malformed():
    frame = frame_for(3, 12, b"\x05")
    _header, offset = parse_request_header(frame, flexible=True)
    with pytest.raises(MalformedRequest):
        decode_request_body(request_schema(3, 12), frame, offset)


def test_build_drops_fields_a_version_lacks():
    from kio.schema.metadata.v1.response import MetadataResponseBroker as V1Broker
    from kio.schema.metadata.v13.response import MetadataResponseBroker as V13Broker

    assert build(V1Broker, node_id=1, host="h", port=9, rack="r", unknown=1).rack == "r"
    assert build(V13Broker, node_id=1, host="h", port=9).host == "h"
