"""Raw Kafka requests over a socket for the bad-input tests: frame encoding, a tiny client,
and checks that the broker is alive and a partition's segment files are unchanged."""

from __future__ import annotations

import datetime
import glob
import io
import os
import socket
import struct
from typing import Any

from kbroker.protocol.codec import response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from tests.broker_process import BrokerProcess

DEADLINE_S = 10.0
SOCKET_REQUEST_MAX_BYTES = 104_857_600  # the broker's default socket.request.max.bytes
MAX_MESSAGE_BYTES = 1_048_588  # default message.max.bytes -> topic max.message.bytes

ERR_CORRUPT_MESSAGE = 2
ERR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERR_MESSAGE_TOO_LARGE = 10
ERR_COORDINATOR_NOT_AVAILABLE = 15
ERR_INVALID_TOPIC = 17
ERR_UNSUPPORTED_VERSION = 35

_correlation = iter(range(1, 1 << 30))


# --- raw protocol client ----------------------------------------------------------------------


def encode_request(api_key: int, version: int, body: Any, correlation_id: int) -> bytes:
    """A whole request frame: size prefix, header v1/v2, body."""
    buf = io.BytesIO()
    header_cls = RequestHeaderV2 if type(body).__flexible__ else RequestHeaderV1
    entity_writer(header_cls)(buf, header_cls(
        request_api_key=i16(api_key), request_api_version=i16(version),
        correlation_id=i32(correlation_id), client_id="bad-input-test",
    ))
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


class RawClient:
    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=DEADLINE_S)

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """One response frame (without size prefix); None when the broker closed the socket."""
        head = self._read_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def assert_closed_by_broker(self) -> None:
        """The broker closes this connection (EOF or reset) well within the deadline."""
        assert self.read_frame() is None, "the broker answered instead of closing the connection"

    def request(self, api_key: int, version: int, body: Any) -> Any:
        """Send a kio request, return the decoded kio response (asserting correlation)."""
        correlation_id = next(_correlation)
        self.send(encode_request(api_key, version, body, correlation_id))
        frame = self.read_frame()
        assert frame is not None, f"connection closed on api {api_key} v{version}"
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id
        schema = response_schema(api_key, version)
        offset = 5 if schema.__flexible__ and api_key != 18 else 4  # response header v1: tags
        value, _size = entity_reader(schema)(frame, offset)
        return value

    def api_versions(self) -> Any:
        response = self.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert response.error_code == 0
        return response


def produce_v9_body(topic: str, partition: int, records: bytes, acks: int = -1) -> produce_v9.ProduceRequest:
    return produce_v9.ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=10),
        topic_data=(produce_v9.TopicProduceData(name=topic, partition_data=(
            produce_v9.PartitionProduceData(index=i32(partition), records=records),
        )),),
    )


def produce(client: RawClient, topic: str, partition: int, records: bytes) -> Any:
    """Produce v9; returns the one partition response."""
    response = client.request(0, 9, produce_v9_body(topic, partition, records))
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


def metadata(client: RawClient, topics: list[str], auto_create: bool = True) -> Any:
    return client.request(3, 12, metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False,
    ))


def segment_bytes(broker: BrokerProcess, topic: str, partition: int = 0) -> dict[str, bytes]:
    """The exact content of every segment file of a partition (to prove nothing changed)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(broker.data_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as fh:
            out[os.path.basename(path)] = fh.read()
    return out


def records(n: int, tag: str, size: int = 20) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"{tag}-k{i}".encode(), f"{tag}-v{i}-".encode().ljust(size, b".")) for i in range(n)]


def assert_alive(broker: BrokerProcess) -> None:
    assert broker.proc is not None and broker.proc.poll() is None, "the broker process died"
    client = RawClient(broker)
    try:
        client.api_versions()
    finally:
        client.close()
