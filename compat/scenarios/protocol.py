"""Protocol surface: the ApiVersions table as clients saw it (kbroker's must be a subset of
Kafka's with identical ranges, see normalise rule 5), and answers no client exposes, read from
raw requests built with kio (the message library, not kbroker's code) over a plain socket."""

from __future__ import annotations

import datetime
import importlib
import io
import itertools
import socket
import struct
from typing import Any

from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from compat.clients.base import Rec
from compat.scenarios import Run, scenario

RAW_TIMEOUT_S = 15.0
FETCH_VERSIONS = range(4, 19)  # every Fetch version Kafka 4.3.1 and kbroker both take
_correlation = itertools.count(1)


class RawConnection:
    """One socket to the target: a kio request out, its kio response back."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=RAW_TIMEOUT_S)

    def close(self) -> None:
        self.sock.close()

    def request(self, api_key: int, version: int, body: Any) -> Any:
        flexible = type(body).__flexible__
        header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
        correlation_id = next(_correlation)
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header_cls(request_api_key=i16(api_key), request_api_version=i16(version),
                                                  correlation_id=i32(correlation_id), client_id="compat-raw"))
        entity_writer(type(body))(buf, body)
        self.sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        frame = self._exact(struct.unpack(">i", self._exact(4))[0])
        if struct.unpack_from(">i", frame, 0)[0] != correlation_id:
            raise RuntimeError("response to another request")
        schema = importlib.import_module(f"{type(body).__module__.rsplit('.', 1)[0]}.response").__dict__[
            type(body).__name__.replace("Request", "Response")]
        offset = 5 if flexible and api_key != 18 else 4  # response header v1: no tagged fields sent
        value, _size = entity_reader(schema)(memoryview(frame).toreadonly(), offset)
        return value

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)


@scenario("protocol/api-versions", needs={"api_versions"})
def api_versions(run: Run) -> Any:
    """The APIs and version ranges the broker advertises, as the client saw them."""
    return {"api_versions": run.client.api_versions()}


def _fetch(conn: RawConnection, version: int, topic: str, topic_id: Any, partition: int, offset: int,
           leader_epoch: int, isolation: int) -> list[Any]:
    module = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    values = {"partition": i32(partition), "current_leader_epoch": i32(leader_epoch), "fetch_offset": i64(offset),
              "last_fetched_epoch": i32(-1), "log_start_offset": i64(-1), "partition_max_bytes": i32(1 << 20)}
    fields = module.FetchPartition.__dataclass_fields__
    wanted = module.FetchPartition(**{k: v for k, v in values.items() if k in fields})
    by_id = "topic_id" in module.FetchTopic.__dataclass_fields__
    fetch_topic = module.FetchTopic(**({"topic_id": topic_id} if by_id else {"topic": topic}), partitions=(wanted,))
    body = {"replica_id": i32(-1), "max_wait": datetime.timedelta(milliseconds=10), "min_bytes": i32(0),
            "max_bytes": i32(1 << 20), "isolation_level": i8(isolation), "session_id": i32(0),
            "session_epoch": i32(-1), "topics": (fetch_topic,), "forgotten_topics_data": (), "rack_id": ""}
    request_fields = module.FetchRequest.__dataclass_fields__
    response = conn.request(1, version, module.FetchRequest(**{k: v for k, v in body.items() if k in request_fields}))
    p = response.responses[0].partitions[0]
    aborted = getattr(p, "aborted_transactions", None)
    return [p.error_code.name.upper(), p.high_watermark, p.last_stable_offset, getattr(p, "log_start_offset", None),
            None if aborted is None else len(aborted), len(p.records or b"")]


@scenario("protocol/fetch-errors-every-version", needs={"produce"}, clients=("confluent",))
def fetch_errors_every_version(run: Run) -> Any:
    """Raw Fetch v4-v18 of a partition holding offsets 2-9 (DeleteRecords up to 2): beyond the
    log end, below the log start (both read_committed too), at the end, with a leader epoch
    from the future (v9+) and for a partition that does not exist. Per answer: error, high
    watermark, last stable offset, log start offset, aborted transactions (null or count),
    record bytes. Kafka answers a read error with -1 offsets and null aborted transactions."""
    t = run.topic()
    run.harness.put(t, [Rec(b"v%d" % i, None, (), 0, run.ts(i)) for i in range(10)])
    run.harness.delete_records(t, 0, 2)
    conn = RawConnection(run.target.bootstrap)
    try:
        metadata = conn.request(3, 12, metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name=t),), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        topic_id = metadata.topics[0].topic_id
        cases = {"beyond-end": (0, 15, -1, 0), "beyond-end-read-committed": (0, 15, -1, 1),
                 "below-start": (0, 1, -1, 0), "below-start-read-committed": (0, 1, -1, 1), "at-end": (0, 10, -1, 0),
                 "at-end-read-committed": (0, 10, -1, 1), "future-leader-epoch": (0, 3, 7, 0),
                 "unknown-partition": (3, 0, -1, 0), "unknown-partition-read-committed": (3, 0, -1, 1)}
        out = {}
        for version in FETCH_VERSIONS:
            out[f"v{version}"] = {
                name: _fetch(conn, version, t, topic_id, partition, offset, epoch, isolation)
                for name, (partition, offset, epoch, isolation) in cases.items()
                if epoch < 0 or version >= 9  # current_leader_epoch arrived in v9
            }
        return out
    finally:
        conn.close()
