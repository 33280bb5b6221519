"""Apache Kafka's own command-line tools (4.3.1, run from the jars) against a real kbroker.

Each test runs the tools' main classes with ``java -cp <kafka libs>/* <MainClass> ...``, exactly
what ``bin/kafka-topics.sh`` and friends do, and checks what a user of the tool sees: the
exact lines printed, exit status and offsets. The jars are resolved once by ``compat.deps``
(Maven, cached under ``~/.cache/kbroker``). Expected outputs are the ones Apache Kafka 4.3.1
itself prints for the same commands (checked against a real single-node Kafka).

kbroker has no consumer groups yet, so the console consumer reads with ``--partition``
(``assign()``), which needs no group coordinator.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat.deps import DepsError, kafka_classpath
from compat.partitioner import murmur2_partition
from tests.broker_process import BrokerProcess

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"

# Small heap, fast start: each command is a short-lived JVM (about 1.5 s).
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
COMMAND_TIMEOUT_S = 60.0
CONSUMER_TIMEOUT_MS = "20000"  # the console consumer gives up (exit 1) after this long idle

# The tools log WARN and above to stderr; their results go to stdout.
LOG4J2_CONFIG = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode()


@dataclass(frozen=True)
class KafkaCli:
    """Runs one Kafka tool's main class in a fresh JVM."""

    java: str
    classpath: str
    log4j_config: Path

    def run(self, main_class: str, *args: str, stdin: bytes = b"", check: bool = True) -> Result:
        cmd = [
            self.java, *JVM_FLAGS, f"-Dlog4j2.configurationFile={self.log4j_config}",
            "-cp", self.classpath, main_class, *args,
        ]  # fmt: skip
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))
        if check:
            assert result.returncode == 0, (
                f"{main_class.rsplit('.', 1)[-1]} {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.text}\nstderr:\n{result.stderr}"
            )
        return result


@pytest.fixture(scope="session")
def kafka_cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    java = shutil.which("java")
    if java is None:
        pytest.fail("no 'java' on PATH: the Kafka CLI tests need a Java 17+ runtime")
    try:
        classpath = kafka_classpath()  # resolves the jars with Maven on first use
    except DepsError as exc:
        pytest.fail(f"Kafka jars unavailable: {exc}")
    log4j = tmp_path_factory.mktemp("kafka-cli") / "log4j2.properties"
    log4j.write_text(LOG4J2_CONFIG)
    return KafkaCli(java, classpath, log4j)


@dataclass(frozen=True)
class Tools:
    """The Kafka CLI bound to one broker: ``tools.topics("--create", ...)`` etc."""

    cli: KafkaCli
    bootstrap: str
    node_id: int

    def topics(self, *args: str, check: bool = True) -> Result:
        return self.cli.run(TOPICS, "--bootstrap-server", self.bootstrap, *args, check=check)

    def configs(self, *args: str) -> Result:
        return self.cli.run(CONFIGS, "--bootstrap-server", self.bootstrap, *args)

    def produce(self, topic: str, lines: bytes, *extra: str) -> Result:
        result = self.cli.run(
            PRODUCER, "--bootstrap-server", self.bootstrap, "--topic", topic,
            "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
            *extra, stdin=lines,
        )  # fmt: skip
        # The console producer sends asynchronously: a failed send is only logged, exit is 0.
        assert "ERROR" not in result.stderr and "Exception" not in result.stderr, result.stderr
        return result

    def consume(self, topic: str, partition: int, max_messages: int, *extra: str) -> Result:
        return self.cli.run(
            CONSUMER, "--bootstrap-server", self.bootstrap, "--topic", topic,
            "--partition", str(partition), "--max-messages", str(max_messages),
            "--timeout-ms", CONSUMER_TIMEOUT_MS, *extra,
        )  # fmt: skip

    def offsets(self, topic: str, *extra: str) -> str:
        return self.cli.run(
            GET_OFFSETS, "--bootstrap-server", self.bootstrap, "--topic", topic, *extra
        ).text

    def delete_records(self, offsets_json: Path) -> str:
        return self.cli.run(
            DELETE_RECORDS, "--bootstrap-server", self.bootstrap,
            "--offset-json-file", str(offsets_json),
        ).text  # fmt: skip


@pytest.fixture(scope="module")
def tools(kafka_cli: KafkaCli, broker: BrokerProcess) -> Iterator[Tools]:
    match = re.search(r"\bnode (\d+)\b", broker.banner)
    assert match, f"cannot read the node id from the broker banner {broker.banner!r}"
    yield Tools(kafka_cli, broker.bootstrap, int(match.group(1)))


def describe(tools: Tools, topic: str) -> tuple[dict[str, str], list[str]]:
    """``kafka-topics --describe``: the topic line's fields, and the partition lines."""
    head, *partitions = tools.topics("--describe", "--topic", topic).text.splitlines()
    fields = dict(field.split(": ", 1) for field in head.split("\t"))
    return fields, partitions


def partition_line(tools: Tools, topic: str, partition: int) -> str:
    n = tools.node_id
    return (
        f"\tTopic: {topic}\tPartition: {partition}\tLeader: {n}\tReplicas: {n}\tIsr: {n}"
        "\tElr: \tLastKnownElr: "
    )


def test_kafka_topics_create_describe_list_alter(tools: Tools) -> None:
    topic = "cli-topics"
    created = tools.topics(
        "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=123456789", "--config", "max.message.bytes=500000",
    )  # fmt: skip
    assert created.text == f"Created topic {topic}.\n"

    again = tools.topics("--create", "--topic", topic, "--partitions", "3", check=False)
    assert again.returncode == 1
    assert again.text == (
        f"Error while executing topic command : Topic '{topic}' already exists.\n"
    )

    fields, partitions = describe(tools, topic)
    topic_id = fields["TopicId"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id) and topic_id != "AAAAAAAAAAAAAAAAAAAAAA"
    assert fields["Topic"] == topic
    assert fields["PartitionCount"] == "3"
    assert fields["ReplicationFactor"] == "1"
    # min.insync.replicas is a cluster-wide dynamic default, listed by Kafka 4.3 too.
    assert sorted(fields["Configs"].split(",")) == [
        "max.message.bytes=500000", "min.insync.replicas=1", "retention.ms=123456789",
    ]  # fmt: skip
    assert partitions == [partition_line(tools, topic, p) for p in range(3)]

    listed = tools.topics("--list").text.splitlines()
    assert topic in listed
    assert listed == sorted(listed)

    assert tools.topics("--alter", "--topic", topic, "--partitions", "5").text == ""
    fields, partitions = describe(tools, topic)
    assert (fields["TopicId"], fields["PartitionCount"]) == (topic_id, "5")
    assert partitions == [partition_line(tools, topic, p) for p in range(5)]

    shrink = tools.topics("--alter", "--topic", topic, "--partitions", "2", check=False)
    assert shrink.returncode == 1
    assert shrink.text.startswith("Error while executing topic command : ")
    assert "InvalidPartitionsException" in shrink.stderr
    assert describe(tools, topic)[0]["PartitionCount"] == "5"

    # A new partition is a real partition: it starts empty at offset 0.
    assert tools.offsets(topic) == "".join(f"{topic}:{p}:0\n" for p in range(5))


# Keys and values as the console producer reads them (key, ':', value); the value may itself
# contain ':' (only the first separator splits) and may be empty; text is UTF-8.
CONSOLE_LINES = "k1:v1\nk2:hello world\nk:a:b\nключ:значение\nk5:\nk1:v6\n".encode()


@pytest.mark.parametrize(
    "producer_args",
    [
        pytest.param((), id="idempotent-acks-all-default"),
        pytest.param(
            ("--producer-property", "enable.idempotence=false", "--producer-property", "acks=1"),
            id="non-idempotent-acks-1",
        ),
    ],
)
def test_console_producer_then_consumer_byte_identical(
    tools: Tools, producer_args: tuple[str, ...], request: pytest.FixtureRequest
) -> None:
    topic = f"cli-console-{request.node.callspec.id}"
    tools.topics("--create", "--topic", topic, "--partitions", "1")
    count = CONSOLE_LINES.count(b"\n")

    tools.produce(topic, CONSOLE_LINES, *producer_args)

    consumed = tools.consume(
        topic, 0, count, "--from-beginning",
        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
    )  # fmt: skip
    assert consumed.stdout == CONSOLE_LINES
    assert f"Processed a total of {count} messages" in consumed.stderr

    middle = tools.consume(
        topic, 0, 2, "--offset", "2",
        "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
        "--formatter-property", "print.partition=true", "--formatter-property", "key.separator=:",
    )  # fmt: skip
    assert middle.stdout == "Partition:0:Offset:2:k:a:b\nPartition:0:Offset:3:ключ:значение\n".encode()

    assert tools.offsets(topic) == f"{topic}:0:{count}\n"


def test_kafka_configs_describe_alter_delete(tools: Tools) -> None:
    topic = "cli-configs"
    tools.topics("--create", "--topic", topic, "--partitions", "1", "--config", "retention.ms=3600000")
    entity = ("--entity-type", "topics", "--entity-name", topic)

    assert tools.configs("--describe", *entity).text == (
        f"Dynamic configs for topic {topic} are:\n"
        "  retention.ms=3600000 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}\n"
    )

    altered = tools.configs(
        "--alter", *entity, "--add-config", "retention.ms=86400000,max.message.bytes=500000"
    )
    assert altered.text == f"Completed updating config for topic {topic}.\n"
    assert tools.configs("--describe", *entity).text == (
        f"Dynamic configs for topic {topic} are:\n"
        "  max.message.bytes=500000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=500000, DEFAULT_CONFIG:message.max.bytes=1048588}\n"
        "  retention.ms=86400000 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}\n"
    )

    deleted = tools.configs("--alter", *entity, "--delete-config", "retention.ms")
    assert deleted.text == f"Completed updating config for topic {topic}.\n"
    assert tools.configs("--describe", *entity).text == (
        f"Dynamic configs for topic {topic} are:\n"
        "  max.message.bytes=500000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=500000, DEFAULT_CONFIG:message.max.bytes=1048588}\n"
    )


def test_get_offsets_and_delete_records(tools: Tools, tmp_path: Path) -> None:
    topic = "cli-offsets"
    tools.topics("--create", "--topic", topic, "--partitions", "2")
    keys = [f"key-{i}".encode() for i in range(12)]
    per_partition = [sum(murmur2_partition(k, 2) == p for k in keys) for p in (0, 1)]
    assert min(per_partition) >= 3, per_partition  # the keys exercise both partitions
    tools.produce(topic, b"".join(k + b":value-" + k + b"\n" for k in keys))
    end0, end1 = per_partition

    assert tools.offsets(topic) == f"{topic}:0:{end0}\n{topic}:1:{end1}\n"
    assert tools.offsets(topic, "--time", "-1") == f"{topic}:0:{end0}\n{topic}:1:{end1}\n"
    assert tools.offsets(topic, "--time", "-2") == f"{topic}:0:0\n{topic}:1:0\n"

    request = tmp_path / "delete.json"
    request.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 2},
        {"topic": topic, "partition": 1, "offset": end1},
    ]}))  # fmt: skip
    head = "Executing records delete operation\nRecords delete operation completed:\n"
    out = tools.delete_records(request)
    assert out.startswith(head)
    assert sorted(out[len(head) :].splitlines()) == [
        f"partition: {topic}-0\tlow_watermark: 2",
        f"partition: {topic}-1\tlow_watermark: {end1}",
    ]

    assert tools.offsets(topic, "--time", "-2") == f"{topic}:0:2\n{topic}:1:{end1}\n"
    assert tools.offsets(topic, "--time", "-1") == f"{topic}:0:{end0}\n{topic}:1:{end1}\n"

    # A consumer from the beginning now starts at the new low watermark.
    first = tools.consume(
        topic, 0, 1, "--from-beginning", "--formatter-property", "print.offset=true"
    )
    third_key = [k for k in keys if murmur2_partition(k, 2) == 0][2].decode()
    assert first.text == f"Offset:2\tvalue-{third_key}\n"

    # Deleting past the high watermark is refused per partition; the tool still exits 0.
    request.write_text(json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": end0 + 5}]}
    ))  # fmt: skip
    assert tools.delete_records(request) == head + (
        f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException:"
        " The requested offset is not within the range of offsets maintained by the server.\n"
    )
