"""The kafka-python adapter: KafkaAdminClient, KafkaProducer and KafkaConsumer (assign, no group)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from compat.clients.base import (
    ADMIN_FEATURES,
    CONSUME_FEATURES,
    PRODUCE_FEATURES,
    Client,
    FetchSettings,
    Json,
    OffsetSpec,
    Rec,
    Start,
    err,
    fetch_config,
    record,
)
from compat.clients.errors import code_name, exception_name

TIMEOUT_MS = 15000
SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}


def _status(status: str) -> Json:
    """kafka-python's per-resource alter result ("OK" or "[Error 40] ...: message") as an error name."""
    if status == "OK":
        return None
    m = re.match(r"\[Error (\d+)\]", status)
    return err(code_name(int(m.group(1))) if m else status)


FETCH_NAMES = {  # FetchSettings field -> this client's consumer config key
    "min_bytes": "fetch_min_bytes",
    "max_wait_ms": "fetch_max_wait_ms",
    "max_bytes": "fetch_max_bytes",
    "partition_max_bytes": "max_partition_fetch_bytes",
    "isolation": "isolation_level",
}


class KafkaPythonClient(Client):
    name = "kafka-python"
    FEATURES = frozenset(
        ADMIN_FEATURES | PRODUCE_FEATURES | CONSUME_FEATURES | {
        "admin.alter_configs_legacy", "list_offsets.max_timestamp", "api_versions"}
    )

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        from kafka import KafkaAdminClient

        if self._admin is None:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap, client_id="compat-kafka-python",
                request_timeout_ms=TIMEOUT_MS,
            )  # fmt: skip
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def reconnect(self) -> None:
        self.close()

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Json:
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            return err(exception_name(exc))
        return None

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 1,
        configs: dict[str, str] | None = None, validate_only: bool = False,
    ) -> Json:  # fmt: skip
        spec = {name: {"num_partitions": partitions, "replication_factor": rf, "configs": configs or {}}}
        return self._call(self.admin.create_topics, spec, validate_only=validate_only)

    def delete_topic(self, name: str) -> Json:
        return self._call(self.admin.delete_topics, [name])

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> Json:
        from kafka.admin import NewPartitions

        return self._call(self.admin.create_partitions, {name: NewPartitions(total)}, validate_only=validate_only)

    def describe_topic(self, name: str) -> Json:
        try:
            (topic,) = self.admin.describe_topics([name])
        except Exception as exc:
            return err(exception_name(exc))
        if topic["error_code"]:
            return err(code_name(topic["error_code"]))
        return {
            "internal": topic["is_internal"],
            "partitions": [
                {"partition": p["partition_index"], "leader": p["leader_id"],
                 "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
                for p in sorted(topic["partitions"], key=lambda p: p["partition_index"])
            ],
        }  # fmt: skip

    def list_topics(self) -> Json:
        return sorted(self.admin.list_topics())

    def describe_cluster(self) -> Json:
        c = self.admin.describe_cluster()
        nodes = sorted([b["broker_id"], f"{b['host']}:{b['port']}"] for b in c["brokers"])
        return {"cluster_id": c["cluster_id"], "controller": c["controller_id"], "nodes": nodes}

    def describe_configs(
        self, kind: str, name: str, keys: list[str] | None = None, synonyms: bool = False
    ) -> Json:
        from kafka.admin import ConfigResource, ConfigResourceType

        rtype = ConfigResourceType.BROKER if kind == "broker" else ConfigResourceType.TOPIC
        try:
            result = self.admin.describe_configs(
                [ConfigResource(rtype, name)], include_synonyms=synonyms, config_filter="all"
            )
        except Exception as exc:
            return err(exception_name(exc))
        entries = result[kind][name]
        out = {}
        for key in sorted(entries):
            if keys is not None and key not in keys:
                continue
            e = entries[key]
            row = {"value": e["value"], "source": e["config_source"], "read_only": e["read_only"],
                   "sensitive": e["is_sensitive"], "type": e.get("config_type")}  # fmt: skip
            if synonyms:
                row["synonyms"] = [[s["name"], s["value"], s["source"]] for s in e.get("synonyms", [])]
            out[key] = row
        return out

    def alter_configs(self, topic: str, ops: list[tuple[str, str, str | None]]) -> Json:
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        kinds = {"set": AlterConfigOp.SET, "delete": AlterConfigOp.DELETE}
        resource = ConfigResource(
            ConfigResourceType.TOPIC, topic, configs={k: (kinds[op], v) for k, op, v in ops}
        )
        try:
            result = self.admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
        except Exception as exc:
            return err(exception_name(exc))
        return _status(result["topic"][topic])

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> Json:
        """AlterConfigs (API 33): the topic's overrides become exactly ``configs``."""
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs=dict(configs))
        try:
            result = self.admin.alter_configs([resource], incremental=False, raise_on_unknown=False)
        except Exception as exc:
            return err(exception_name(exc))
        return _status(result["topic"][topic])

    def delete_records(self, topic: str, partition: int, before: int) -> Json:
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        try:
            result = self.admin.delete_records({tp: before})
        except Exception as exc:
            return err(exception_name(exc))
        row = result[tp]
        if row.get("error_code"):
            return err(code_name(row["error_code"]))
        return row["low_watermark"]

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec) -> Json:
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        wire = SPECS[spec] if isinstance(spec, str) else spec
        try:
            got = self.admin.list_partition_offsets({tp: wire})[tp]
        except Exception as exc:
            return err(exception_name(exc))
        return {"offset": got.offset, "timestamp": got.timestamp}

    def api_versions(self) -> Json:
        self.admin.describe_cluster()  # make sure a connection (and its ApiVersions) exists
        return {str(int(k)): list(v) for k, v in sorted(self.admin.api_versions().items())}

    # --- data --------------------------------------------------------------------------------
    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        from kafka import KafkaProducer

        config: dict[str, Any] = {
            "acks": {"all": "all", "1": 1, "0": 0}[acks], "linger_ms": 5,
            "compression_type": None if codec == "none" else codec,
            "max_block_ms": 5000, "request_timeout_ms": 10000, "delivery_timeout_ms": 15000,
        }  # fmt: skip
        config.update(extra or {})
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, **config)
        results: list[Any] = []
        try:
            for r in records:
                try:
                    future = producer.send(
                        topic, value=r.value, key=r.key, partition=r.partition,
                        headers=list(r.headers), timestamp_ms=r.timestamp,
                    )  # fmt: skip
                except Exception as exc:
                    results.append(err(exception_name(exc)))
                    continue
                results.append(future)
                if sync:
                    producer.flush(TIMEOUT_MS / 1000)
            producer.flush(TIMEOUT_MS / 1000)
            out: list[Json] = []
            for f in results:
                if isinstance(f, dict):
                    out.append(f)
                    continue
                try:
                    out.append(f.get(TIMEOUT_MS / 1000).offset)
                except Exception as exc:
                    out.append(err(exception_name(exc)))
            return out
        finally:
            producer.close(timeout=5)

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        from kafka import KafkaConsumer, TopicPartition

        s = settings or FetchSettings()
        config: dict[str, Any] = {"group_id": None, "enable_auto_commit": False,
                                  "auto_offset_reset": s.reset or "earliest"}  # fmt: skip
        config.update(fetch_config(s, FETCH_NAMES))
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, **config)
        tps = [TopicPartition(topic, p) for p in partitions]
        got: list[Json] = []
        result: dict[str, Json] = {"records": got}
        try:
            consumer.assign(tps)
            if start == "earliest":
                consumer.seek_to_beginning(*tps)
            elif start == "latest":
                consumer.seek_to_end(*tps)
            elif isinstance(start, dict):
                found = consumer.offsets_for_times({tp: start["timestamp"] for tp in tps})
                for tp in tps:
                    if found.get(tp) is None:
                        consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, found[tp].offset)
            else:
                for tp in tps:
                    consumer.seek(tp, start)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if max_records is not None and len(got) >= max_records:
                    break
                if until is not None and all(consumer.position(tp) >= until[tp.partition] for tp in tps
                                             if tp.partition in until):
                    break
                if until_moved and all(consumer.position(tp) != start for tp in tps):
                    break
                for tp_records in consumer.poll(timeout_ms=100).values():
                    for m in tp_records:
                        got.append(record(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                          m.timestamp, "LogAppendTime" if m.timestamp_type == 1 else "CreateTime"))
            del got[max_records if max_records is not None else len(got):]
            result["positions"] = {str(tp.partition): consumer.position(tp) for tp in tps}
        except Exception as exc:
            result["error"] = exception_name(exc)
        finally:
            consumer.close()
        return result
