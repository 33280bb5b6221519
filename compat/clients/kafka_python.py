"""The kafka-python adapter: KafkaAdminClient, KafkaProducer and KafkaConsumer (assign, and
subscribe in a classic group), plus hand-built group requests through the admin client."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat.clients.base import (
    ADMIN_FEATURES,
    CONSUME_FEATURES,
    PRODUCE_FEATURES,
    Client,
    FetchSettings,
    GroupMember,
    Json,
    OffsetSpec,
    Rec,
    Start,
    Unsupported,
    err,
    fetch_config,
    record,
)
from compat.clients.errors import LoggedFailures, code_name, exception_name

if TYPE_CHECKING:
    from compat.security.client_security import ClientSecurity

TIMEOUT_MS = 15000
BOOTSTRAP_TIMEOUT_MS = 3000  # connect: how long kafka-python retries a failing bootstrap
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


def _record(m: Any) -> Json:
    return record(m.partition, m.offset, m.key, m.value, list(m.headers or []), m.timestamp,
                  "LogAppendTime" if m.timestamp_type == 1 else "CreateTime")  # fmt: skip


def _error_class(error: Any) -> Json:
    """A kafka-python error class (NoError included) as None or an error."""
    errno = getattr(error, "errno", 0)
    return None if not errno else err(code_name(errno))


class KafkaPythonMember(GroupMember):
    """KafkaConsumer.subscribe in a classic group.

    Two kafka-python 3.0 races are kept out of the way (both client-side; kbroker answers a
    join within milliseconds, which makes them likely): the leader assigns nothing when it
    computes the assignment before its metadata names the topic (a second rebalance follows),
    so the member learns the topic's partitions before it subscribes; and a poll that gives up
    between a SyncGroup request and its response can drop the assignment for good (the member
    stays unassigned until the coordinator expels it), so a poll waits at least
    ``MIN_POLL_MS``, long enough for a join/sync round to finish inside it."""

    MIN_POLL_MS = 1000

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
            fetch_max_wait_ms=100, request_timeout_ms=TIMEOUT_MS,
        )  # fmt: skip
        self.consumer.partitions_for_topic(topic)  # fetches the topic's metadata
        self.consumer.subscribe([topic])

    def poll(self, timeout_ms: int = 100) -> list[Json]:
        timeout_ms = max(timeout_ms, self.MIN_POLL_MS)
        return [_record(m) for ms in self.consumer.poll(timeout_ms=timeout_ms).values() for m in ms]

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def positions(self) -> dict[int, int]:
        from kafka import TopicPartition

        return {p: self.consumer.position(TopicPartition(self.topic, p)) for p in self.assignment()}

    def commit(self, offsets: dict[int, tuple[int, str]]) -> Json:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        try:
            self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, m, -1)
                                  for p, (o, m) in offsets.items()})  # fmt: skip
        except Exception as exc:
            return err(exception_name(exc))
        return None

    def committed(self, partitions: list[int]) -> Json:
        from kafka import TopicPartition

        out: dict[str, Json] = {}
        for p in partitions:
            got = self.consumer.committed(TopicPartition(self.topic, p), metadata=True)
            out[str(p)] = None if got is None else [got.offset, got.metadata]
        return out

    def close(self) -> None:
        self.consumer.close()


TLS_CAUSE = re.compile(r"\[SSL: [A-Z0-9_]+\] [^(]*\(_ssl\.c:\d+\)")


def _causes(messages: list[str]) -> list[str]:
    """Why kafka-python's bootstrap failed, where that is deterministic: the distinct TLS errors
    named in what it logged ("[SSL: ...] ... (_ssl.c:N)", without the connection objects and
    backoff times around them). A SASL failure is left out: whether kafka-python reads the
    broker's SaslAuthenticate error before it sees the connection close is a race, on Kafka too."""
    return sorted({m.group(0) for m in map(TLS_CAUSE.search, messages) if m is not None})


class KafkaPythonClient(Client):
    name = "kafka-python"
    FEATURES = frozenset(
        ADMIN_FEATURES | PRODUCE_FEATURES | CONSUME_FEATURES | {
        "admin.alter_configs_legacy", "list_offsets.max_timestamp", "api_versions",
        "group", "group.admin", "group.delete_offsets", "group.raw", "group.list_state"}
    )

    SECURITY = frozenset({"SSL", "mTLS", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self._admin: Any = None

    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        """kafka-python's keyword arguments: ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile``,
        ``sasl_plain_username``/``_password`` (SCRAM too), and for OAUTHBEARER a token provider
        handing out an unsecured token."""
        from kafka.net.sasl.oauth import AbstractTokenProvider

        config: dict[str, Any] = {"security_protocol": security.protocol}
        if security.ca is not None:
            config["ssl_cafile"] = str(security.ca)
        if security.certificate is not None:
            config |= {"ssl_certfile": str(security.certificate.certificate),
                       "ssl_keyfile": str(security.certificate.key)}  # fmt: skip
        if security.mechanism == "OAUTHBEARER":

            class UnsecuredToken(AbstractTokenProvider):  # type: ignore[misc]
                def token(self) -> str:
                    return security.unsecured_token()

            config |= {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": UnsecuredToken()}
        elif security.mechanism is not None:
            config |= {"sasl_mechanism": security.mechanism, "sasl_plain_username": security.username,
                       "sasl_plain_password": security.password}  # fmt: skip
        return config

    def connect(self, extra: dict[str, Any]) -> Json:
        """A KafkaConsumer lists topics: None when it does, else the exception it raises (a
        generic bootstrap timeout) and the TLS errors it logged meanwhile (``_causes``)."""
        from kafka import KafkaConsumer

        with LoggedFailures("kafka") as logged:
            try:
                consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                                         **extra)  # fmt: skip
            except Exception as exc:
                return {"error": exception_name(exc), "message": str(exc), "logged": _causes(logged.messages)}
        try:
            consumer.topics()
        finally:
            consumer.close()
        return None

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

    # --- groups ------------------------------------------------------------------------------
    def group_member(self, topic: str, group: str, protocol: str = "classic") -> GroupMember:
        if protocol != "classic":
            raise Unsupported("kafka-python speaks the classic group protocol only")
        return KafkaPythonMember(self.bootstrap, topic, group)

    def list_groups(self, state: str | None = None) -> Json:
        listed = self.admin.list_groups(states_filter=[state] if state else None)
        return sorted([g["group_id"], g.get("group_state"), g.get("group_type")] for g in listed)

    def describe_group(self, group: str) -> Json:
        try:
            g = self.admin.describe_groups([group])[group]
        except Exception as exc:
            return err(exception_name(exc))
        m = re.match(r"\[Error (\d+)\]", g["error"] or "")
        return {"error": code_name(int(m.group(1))) if m else g["error"], "state": g["group_state"],
                "protocol_type": g["protocol_type"], "protocol": g["protocol_data"],
                "members": len(g["members"])}  # fmt: skip

    def delete_group(self, group: str) -> Json:
        try:
            res = self.admin.delete_groups([group])[group]
        except Exception as exc:
            return err(exception_name(exc))
        if res == "OK":
            return None
        import kafka.errors

        errno = getattr(getattr(kafka.errors, res, None), "errno", None)  # an error class name
        return err(code_name(errno) if isinstance(errno, int) else res)

    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        from kafka import TopicPartition

        try:
            got = self.admin.list_group_offsets({group: [TopicPartition(topic, p) for p in partitions]})[group]
        except Exception as exc:
            return err(exception_name(exc))
        return {str(tp.partition): None if o.offset < 0 else [o.offset, o.metadata]
                for tp, o in sorted(got.items())}  # fmt: skip

    def alter_group_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> Json:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        try:
            got = self.admin.alter_group_offsets(
                group, {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        except Exception as exc:
            return err(exception_name(exc))
        errors = {str(tp.partition): _error_class(e) for tp, e in sorted(got.items())}
        return errors if any(errors.values()) else None

    def delete_group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        from kafka import TopicPartition

        try:
            got = self.admin.delete_group_offsets(group, [TopicPartition(topic, p) for p in partitions])
        except Exception as exc:
            return err(exception_name(exc))
        return {str(tp.partition): _error_class(e) for tp, e in sorted(got.items())}

    def raw_offset_commit(self, group: str, generation: int, member: str, topic: str, offset: int) -> Json:
        from kafka.protocol.consumer import OffsetCommitRequest

        t = OffsetCommitRequest.OffsetCommitRequestTopic
        request = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member,
            group_instance_id=None, retention_time_ms=-1,
            topics=[t(name=topic, partitions=[t.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="raw")])],
            max_version=8,
        )  # fmt: skip
        admin = self.admin

        async def send() -> Any:
            node = await admin._find_coordinator_id(group)
            return await admin._manager.send(request, node_id=node)

        try:
            response = admin._manager.run(send)
        except Exception as exc:
            return err(exception_name(exc))
        code = response.topics[0].partitions[0].error_code
        return None if code == 0 else err(code_name(code))

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
