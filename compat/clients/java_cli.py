"""The Java CLI adapter: Apache Kafka's own command-line tools (TopicCommand, ConfigCommand, ...).

Each operation runs a tool's main class exactly as ``bin/kafka-*.sh`` would, with the same
arguments a user types, but inside the warm ``CompatDriver`` JVM (``Exit.exit`` becomes a
returned status, System.in/out/err are the tool's own streams; starting a JVM per command
would cost ~1 s each). The outcome is what the user sees: exit status, stdout and stderr
lines (tool log lines at ERROR go to stderr without timestamps, as with Kafka's default
tools logging).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat.clients.base import Client, FetchSettings, Json, OffsetSpec, Rec, Start, Unsupported, fetch_config
from compat.clients.java import JAVA_SECURITY, java_security
from compat.clients.java_driver import JavaDriver

if TYPE_CHECKING:
    from compat.security.client_security import ClientSecurity

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
CLUSTER = "org.apache.kafka.tools.ClusterTool"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
NULL = "<NULL>"
API_LINE = re.compile(r"^\s*\w+\((\d+)\): (\d+) to (\d+) \[usable: \d+\],?$")


def _text(data: bytes | None) -> str:
    if data is None:
        return NULL
    text = data.decode()
    if any(c in text for c in "\t\n,:") or text == NULL:
        raise Unsupported("the console producer cannot send this byte string")
    return text


FETCH_NAMES = {  # FetchSettings field -> this client's consumer config key
    "min_bytes": "fetch.min.bytes",
    "max_wait_ms": "fetch.max.wait.ms",
    "max_bytes": "fetch.max.bytes",
    "partition_max_bytes": "max.partition.fetch.bytes",
    "isolation": "isolation.level",
}


class JavaCliClient(Client):
    name = "java-cli"
    FEATURES = frozenset({
        "admin.create_topic", "admin.delete_topic", "admin.create_partitions", "admin.describe_topic",
        "admin.list_topics", "admin.describe_cluster", "admin.describe_configs", "admin.alter_configs",
        "admin.delete_records", "admin.list_offsets", "list_offsets.max_timestamp", "api_versions",
        "produce", "produce.headers", "produce.null", "produce.acks0", "consume", "consume.fetch", "group.cli",
    })  # fmt: skip

    SECURITY = JAVA_SECURITY

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self.driver = JavaDriver(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.command_config: Path | None = None  # --command-config for every tool (security_config)

    def close(self) -> None:
        self.driver.close()

    def reconnect(self) -> None:
        self.driver.close()  # a new JVM (and Admin client) starts on the next request

    def run(self, main: str, *args: str, stdin: str = "", command: tuple[str, ...] = ()) -> dict[str, Json]:
        """Run ``main command... --bootstrap-server B args...``; exit status and output lines."""
        argv = [*command, "--bootstrap-server", self.bootstrap, *args]
        if self.command_config is not None:
            argv += ["--command-config", str(self.command_config)]
        r = self.driver.call("cli", main=main, args=argv, stdin=stdin)
        return {"exit": r["exit"], "stdout": r["stdout"].splitlines(), "stderr": r["stderr"].splitlines()}

    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        """Writes the settings to a properties file every tool of this adapter then gets as
        ``--command-config``, as a user of the scripts would; nothing is left to pass per call."""
        self.command_config = self.workdir / "client-security.properties"
        self.command_config.write_text("".join(f"{k}={v}\n" for k, v in java_security(security).items()))
        return {}

    def connect(self, extra: dict[str, Any]) -> Json:
        """``kafka-topics --list`` (with the ``--command-config`` file): None when it lists,
        else its exit status and output (stack frames dropped)."""
        out = self.run(TOPICS, "--list")
        if out["exit"] == 0:
            return None
        out["stderr"] = [line for line in out["stderr"] if not line.startswith("\tat ")]
        return out

    def consumer_groups(self, *args: str, only: str | None = None) -> dict[str, Json]:
        """``kafka-consumer-groups`` with ``args``. Its tables pad columns to the widest value
        of the run (group ids, member ids, hosts), so runs of spaces become one; with ``only``
        stdout keeps just the header and the lines naming that group (``--list`` prints every
        group of the cluster); stack frames in stderr are dropped."""
        out = self.run(GROUPS, *args)
        lines = [re.sub(r" {2,}", " ", line.rstrip()) for line in out["stdout"]]
        if only is not None:
            lines = [line for i, line in enumerate(lines) if only in line.split(" ") or (i == 0 and "GROUP" in line)]
        out["stdout"] = lines
        out["stderr"] = [line for line in out["stderr"] if not line.startswith("\tat ")]  # stack frames
        return out

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 1,
        configs: dict[str, str] | None = None, validate_only: bool = False,
    ) -> Json:  # fmt: skip
        if validate_only:
            raise Unsupported("TopicCommand has no validate-only mode")
        args = ["--create", "--topic", name, "--partitions", str(partitions), "--replication-factor", str(rf)]
        for key, value in (configs or {}).items():
            args += ["--config", f"{key}={value}"]
        return self.run(TOPICS, *args)

    def delete_topic(self, name: str) -> Json:
        return self.run(TOPICS, "--delete", "--topic", name)

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> Json:
        if validate_only:
            raise Unsupported("TopicCommand has no validate-only mode")
        return self.run(TOPICS, "--alter", "--topic", name, "--partitions", str(total))

    def describe_topic(self, name: str) -> Json:
        return self.run(TOPICS, "--describe", "--topic", name)

    def list_topics(self) -> Json:
        return self.run(TOPICS, "--list")

    def describe_cluster(self) -> Json:
        return self.run(CLUSTER, command=("cluster-id",))

    def describe_configs(
        self, kind: str, name: str, keys: list[str] | None = None, synonyms: bool = False
    ) -> Json:
        entity = "brokers" if kind == "broker" else "topics"
        out = self.run(CONFIGS, "--describe", "--entity-type", entity, "--entity-name", name, "--all")
        if keys is not None:
            out["stdout"] = [line for line in out["stdout"]
                             if not line.startswith("  ") or line.strip().split("=", 1)[0] in keys]  # fmt: skip
        return out

    def alter_configs(self, topic: str, ops: list[tuple[str, str, str | None]]) -> Json:
        args = ["--alter", "--entity-type", "topics", "--entity-name", topic]
        added = ",".join(f"{k}={v}" for k, op, v in ops if op == "set")
        deleted = ",".join(k for k, op, _ in ops if op == "delete")
        if added:
            args += ["--add-config", added]
        if deleted:
            args += ["--delete-config", deleted]
        return self.run(CONFIGS, *args)

    def delete_records(self, topic: str, partition: int, before: int) -> Json:
        spec = self.workdir / f"delete-{topic}-{partition}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": partition, "offset": before}]}))  # fmt: skip
        return self.run(DELETE_RECORDS, "--offset-json-file", str(spec))

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec) -> Json:
        time = {"earliest": "-2", "latest": "-1", "max_timestamp": "-3"}.get(spec, str(spec))  # type: ignore[arg-type]
        return self.run(OFFSETS, "--topic", topic, "--partitions", str(partition), "--time", time)

    def api_versions(self) -> Json:
        out = self.run(API_VERSIONS)
        versions = {}
        for line in out["stdout"]:
            m = API_LINE.match(line)
            if m:
                versions[m.group(1)] = [int(m.group(2)), int(m.group(3))]
        return versions if out["exit"] == 0 else out

    # --- data --------------------------------------------------------------------------------
    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        if any(r.partition not in (None, 0) or r.timestamp is not None for r in records):
            raise Unsupported("the console producer cannot pick partitions or timestamps")
        lines = []
        for r in records:
            headers = ",".join(f"{_text(k.encode())}:{_text(v)}" for k, v in r.headers)
            lines.append(f"{headers or NULL}\t{_text(r.key)}\t{_text(r.value)}\n")
        props = {"acks": acks, "compression.type": codec, "linger.ms": "5", "delivery.timeout.ms": "15000",
                 "request.timeout.ms": "10000", **(extra or {})}  # fmt: skip
        if sync:
            props["batch.size"] = "0"
        args = ["--topic", topic, "--sync"] if sync else ["--topic", topic]
        for key, value in props.items():
            args += ["--command-property", f"{key}={value}"]
        for key, value in {"parse.key": "true", "parse.headers": "true", "null.marker": NULL,
                           "key.separator": "\t", "headers.delimiter": "\t", "headers.separator": ",",
                           "headers.key.separator": ":"}.items():  # fmt: skip
            args += ["--reader-property", f"{key}={value}"]
        return self.run(PRODUCER, *args, stdin="".join(lines))

    def _offset(self, topic: str, partition: int, spec: str) -> int:
        """Where "earliest"/"latest" is now (Admin API), to tell the console consumer how many to read."""
        answer = self.driver.call("list_offsets", bootstrap=self.bootstrap, topic=topic, partition=partition,
                                  spec=spec)  # fmt: skip
        return int(answer["offset"])

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        if until_moved:
            raise Unsupported("positions are not visible")
        if len(partitions) != 1 or isinstance(start, dict):
            raise Unsupported("the console consumer reads one partition from an offset")
        (partition,) = partitions
        s = settings or FetchSettings()
        if s.reset is not None:
            raise Unsupported("the console consumer picks its own reset policy")
        count = max_records
        if count is None and until is not None and partition in until:
            first = self._offset(topic, partition, start) if isinstance(start, str) else int(start)
            count = until[partition] - first
        if count is not None and count <= 0:
            return {"exit": None, "stdout": [], "stderr": ["(nothing to read: console consumer not run)"]}
        args: list[str] = ["--topic", topic, "--partition", str(partition), "--offset", str(start),
                           "--timeout-ms", str(int(timeout_s * 1000))]  # fmt: skip
        if count is not None:
            args += ["--max-messages", str(count)]
        for key in ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key"):
            args += ["--formatter-property", f"{key}=true"]
        props: dict[str, Any] = {}
        props.update(fetch_config(s, FETCH_NAMES))
        for key, value in props.items():
            args += ["--command-property", f"{key}={value}"]
        return self.run(CONSUMER, *args)
