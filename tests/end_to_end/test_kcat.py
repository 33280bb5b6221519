"""kcat (librdkafka's command-line client) against a real kbroker: what its users rely on.

``kcat -L`` shows the broker and each topic's partitions; ``-P -K:`` produces keyed lines and
``-C -e -f ...`` reads them back byte-identical at contiguous offsets, from the beginning or
from an absolute or relative offset; headers (``-H``) round-trip; each compression codec
(``-z``) round-trips and really is what the broker stores. Topics are created up front with
the admin API (kcat cannot create topics), so nothing depends on auto-creation.

The expected outputs are what kcat prints against Apache Kafka 4.3.1 for the same commands.
"""

from __future__ import annotations

import glob
import json
import os
import re
import struct
import subprocess
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from compat.deps import DepsError, ensure_debian_tools
from tests.broker_process import BrokerProcess

COMMAND_TIMEOUT_S = 30.0
# Record batch v2: attributes (int16) sit 21 bytes into the batch; the low 3 bits are the codec.
ATTRIBUTES_AT = 8 + 4 + 4 + 1 + 4
CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def kcat_bin() -> str:
    try:
        return ensure_debian_tools(quiet=True)["kcat"]
    except DepsError as exc:
        pytest.fail(str(exc))


class Kcat:
    def __init__(self, binary: str, broker: BrokerProcess) -> None:
        self.binary = binary
        self.broker = broker

    def __call__(self, *args: str, stdin: bytes = b"") -> bytes:
        cmd = [self.binary, "-b", self.broker.bootstrap, *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()}"
        return proc.stdout

    def produce(self, topic: str, lines: bytes, *args: str) -> None:
        self("-P", "-t", topic, *args, stdin=lines)

    def consume(self, topic: str, fmt: str, *args: str) -> bytes:
        """Read to the current end of the topic (``-e``) and exit."""
        return self("-C", "-t", topic, "-e", "-q", "-f", fmt, *args)


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kcat-test-setup")
    yield client
    client.close()


@pytest.fixture
def kcat(kcat_bin: str, broker: BrokerProcess) -> Kcat:
    return Kcat(kcat_bin, broker)


def create_topic(admin: KafkaAdminClient, name: str, partitions: int = 1) -> str:
    admin.create_topics(
        {name: {"num_partitions": partitions, "replication_factor": 1}}, wait_for_metadata=True
    )
    return name


def stored_codecs(broker: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    """The compression codec of every batch in the partition's segments (Kafka's on-disk layout)."""
    codecs = []
    for path in sorted(glob.glob(os.path.join(broker.data_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as fh:
            data = fh.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes,) = struct.unpack_from(">h", data, pos + ATTRIBUTES_AT)
            codecs.append(attributes & 0x7)
            pos += 12 + length
    return codecs


def node_id(broker: BrokerProcess) -> int:
    match = re.search(r"\bnode (\d+)\b", broker.banner)
    assert match, f"cannot read the node id from the broker banner {broker.banner!r}"
    return int(match.group(1))


def test_metadata_lists_broker_and_topic(kcat: Kcat, admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    topic = create_topic(admin, "kcat-meta", partitions=3)
    n, host = node_id(broker), broker.bootstrap

    assert kcat("-L", "-t", topic).decode() == (
        f"Metadata for {topic} (from broker {n}: {host}/{n}):\n"
        " 1 brokers:\n"
        f"  broker {n} at {host} (controller)\n"
        " 1 topics:\n"
        f'  topic "{topic}" with 3 partitions:\n'
        + "".join(f"    partition {p}, leader {n}, replicas: {n}, isrs: {n}\n" for p in range(3))
    )

    everything = json.loads(kcat("-L", "-J"))
    assert everything["brokers"] == [{"id": n, "name": host}]
    assert everything["controllerid"] == n
    topics = {t["topic"]: t for t in everything["topics"]}
    assert "error" not in topics[topic]
    assert topics[topic]["partitions"] == [
        {"partition": p, "leader": n, "replicas": [{"id": n}], "isrs": [{"id": n}]} for p in range(3)
    ]


def test_produce_keyed_lines_and_consume_byte_identical(kcat: Kcat, admin: KafkaAdminClient) -> None:
    topic = create_topic(admin, "kcat-keyed")
    # kcat splits at the first ':'; a value may contain ':' or be empty; a key may be empty.
    lines = "k1:v1\nk2:hello world\nk:a:b\nключ:значение\nk5:\n:empty-key\nk1:v7\n".encode()
    kcat.produce(topic, lines, "-K:")

    expected = b"".join(line.replace(b":", b"=", 1) + b"\n" for line in lines.splitlines())
    assert kcat.consume(topic, "%k=%s\n") == expected
    # Contiguous offsets from 0, key and value lengths as produced (-1 would be a null key).
    assert kcat.consume(topic, "%p %o %K %S\n").decode().splitlines() == [
        f"0 {offset} {len(key)} {len(value)}"
        for offset, (key, _, value) in enumerate(line.partition(b":") for line in lines.splitlines())
    ]


def test_consume_from_beginning_absolute_and_relative_offsets(kcat: Kcat, admin: KafkaAdminClient) -> None:
    topic = create_topic(admin, "kcat-offsets")
    kcat.produce(topic, b"".join(b"value-%d\n" % i for i in range(10)))

    def read(*args: str) -> list[str]:
        return kcat.consume(topic, "%o %s\n", *args).decode().splitlines()

    assert read("-o", "beginning") == [f"{i} value-{i}" for i in range(10)]
    assert read("-o", "beginning", "-c", "3") == [f"{i} value-{i}" for i in range(3)]
    assert read("-o", "7") == [f"{i} value-{i}" for i in range(7, 10)]
    assert read("-o", "-2") == ["8 value-8", "9 value-9"]  # relative to the end
    assert read("-o", "end") == []

    # Null keys (no -K): the key prints empty and its length is -1.
    assert kcat.consume(topic, "%K|%k|%s\n", "-o", "9").decode() == "-1||value-9\n"


def test_headers_round_trip(kcat: Kcat, admin: KafkaAdminClient) -> None:
    topic = create_topic(admin, "kcat-headers")
    kcat.produce(
        topic, b"k1:v1\nk2:v2\n", "-K:",
        "-H", "trace=abc-123", "-H", "empty=", "-H", "dup=1", "-H", "dup=2", "-H", "nullvalue",
    )  # fmt: skip
    kcat.produce(topic, b"k3:no headers\n", "-K:")

    # Order and duplicates are kept; an empty value stays empty, a null value stays null.
    headers = "trace=abc-123,empty=,dup=1,dup=2,nullvalue=NULL"
    assert kcat.consume(topic, "%o|%h|%k=%s\n").decode() == (
        f"0|{headers}|k1=v1\n1|{headers}|k2=v2\n2||k3=no headers\n"
    )


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_compressed_produce_round_trips(
    kcat: Kcat, admin: KafkaAdminClient, broker: BrokerProcess, codec: str
) -> None:
    topic = create_topic(admin, f"kcat-{codec}")
    # librdkafka sends a batch uncompressed when compressing doesn't shrink it, so every value
    # is compressible on its own (however the producer happens to batch the lines).
    lines = b"".join(b"key-%03d:%d %s\n" % (i, i, codec.encode() * 40) for i in range(300))
    kcat.produce(topic, lines, "-K:", "-z", codec)

    expected = b"".join(line.replace(b":", b"=", 1) + b"\n" for line in lines.splitlines())
    assert kcat.consume(topic, "%k=%s\n") == expected
    assert kcat.consume(topic, "%o\n", "-o", "-1") == b"299\n"
    # The producer really compressed with this codec, and the broker kept the batches as sent.
    codecs = stored_codecs(broker, topic)
    assert codecs and set(codecs) == {CODEC_IDS[codec]}, codecs
