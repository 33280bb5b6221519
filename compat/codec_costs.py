"""Measure what the message codec costs, to justify the choice recorded in the README.

``python -m compat.codec_costs`` times, on this machine: kio's native decode of a Produce v9
request, kio's (pure Python) encode of a Produce v9 response, kbroker's hand-packed encode of
the same response, and kio's encode of a Metadata response. Medians of several runs, in µs.
"""

from __future__ import annotations

import datetime
import io
import statistics
import struct
import timeit

from kbroker.protocol.record_builder import build_batch
from kbroker.replication.replica_manager import ProduceResult
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as preq
from kio.schema.produce.v9 import response as presp
from kio.serial import entity_reader, entity_writer

from kbroker.handlers.produce import encode_response


def _median_us(fn, number: int = 20000, repeat: int = 5) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    batch = build_batch([(b"key", b"x" * 1024)] * 16)
    request = preq.ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(preq.TopicProduceData(
            name="t", partition_data=(preq.PartitionProduceData(index=0, records=batch),)
        ),),
    )
    buf = io.BytesIO()
    entity_writer(preq.ProduceRequest)(buf, request)
    raw = memoryview(buf.getvalue()).toreadonly()
    reader = entity_reader(preq.ProduceRequest)
    response = presp.ProduceResponse(
        responses=(presp.TopicProduceResponse(name="t", partition_responses=(presp.PartitionProduceResponse(
            index=0, error_code=ErrorCode.none, base_offset=100, log_append_time=None, log_start_offset=0,
            record_errors=(), error_message=None),)),),
        throttle_time=datetime.timedelta(0),
    )
    writer = entity_writer(presp.ProduceResponse)
    results = [("t", None, [(0, ProduceResult(ErrorCode.none, 100, -1, 0))])]

    def kio_encode() -> None:
        writer(io.BytesIO(), response)

    rows = [
        ("kio decode Produce v9 request (16 KiB batch)", _median_us(lambda: reader(raw, 0))),
        ("kio encode Produce v9 response", _median_us(kio_encode)),
        ("hand-packed Produce v9 response", _median_us(lambda: encode_response(1, 9, results))),
        ("struct.pack of 4 ints (floor)", _median_us(lambda: struct.pack(">ihqq", 0, 0, 100, -1))),
    ]
    for name, us in rows:
        print(f"{name:50s} {us:8.2f} µs")


if __name__ == "__main__":
    main()
