"""The aiokafka adapter: AIOKafkaAdminClient, AIOKafkaProducer and AIOKafkaConsumer (assign,
and subscribe in a classic group).

aiokafka is asyncio-only; the adapter owns an event loop on a background thread and runs each
operation there to completion. Its admin client returns raw protocol responses, whose error
codes are read per topic/resource. It has no IncrementalAlterConfigs (only the legacy,
replace-everything AlterConfigs) and no ListOffsets admin call (offsets come from a consumer).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
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

TIMEOUT_S = 15.0


async def _stop(client: Any) -> None:
    """Stop an aiokafka consumer/producer. A consumer stopped right after it started can raise
    CancelledError from an internal task it cancels; that is aiokafka's shutdown, not ours."""
    try:
        await client.stop()
    except asyncio.CancelledError:
        pass


FETCH_NAMES = {  # FetchSettings field -> this client's consumer config key
    "min_bytes": "fetch_min_bytes",
    "max_wait_ms": "fetch_max_wait_ms",
    "max_bytes": "fetch_max_bytes",
    "partition_max_bytes": "max_partition_fetch_bytes",
    "isolation": "isolation_level",
}


class AiokafkaMember(GroupMember):
    """AIOKafkaConsumer.subscribe in a classic group, on the adapter's event loop (its group
    coordination runs there in the background, so members may poll in turn)."""

    POLL_IN_THREADS = False

    def __init__(self, client: AiokafkaClient, topic: str, group: str) -> None:
        from aiokafka import AIOKafkaConsumer

        self.client, self.topic = client, topic

        async def start() -> Any:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=client.bootstrap, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                fetch_max_wait_ms=100,
            )  # fmt: skip
            await consumer.start()
            consumer.subscribe([topic])
            return consumer

        self.consumer = client.run(start())

    def poll(self, timeout_ms: int = 100) -> list[Json]:
        batches = self.client.run(self.consumer.getmany(timeout_ms=timeout_ms))
        return [record(m.partition, m.offset, m.key, m.value, list(m.headers or []), m.timestamp,
                       "LogAppendTime" if m.timestamp_type == 1 else "CreateTime")
                for ms in batches.values() for m in ms]  # fmt: skip

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def positions(self) -> dict[int, int]:
        from aiokafka.structs import TopicPartition

        async def go() -> dict[int, int]:
            return {p: await self.consumer.position(TopicPartition(self.topic, p)) for p in self.assignment()}

        return self.client.run(go())

    def commit(self, offsets: dict[int, tuple[int, str]]) -> Json:
        from aiokafka.structs import OffsetAndMetadata, TopicPartition

        try:
            self.client.run(self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, m)
                                                  for p, (o, m) in offsets.items()}))  # fmt: skip
        except Exception as exc:
            return err(exception_name(exc))
        return None

    def committed(self, partitions: list[int]) -> Json:
        from aiokafka.structs import TopicPartition

        async def go() -> Json:
            out: dict[str, Json] = {}
            for p in partitions:
                offset = await self.consumer.committed(TopicPartition(self.topic, p))
                out[str(p)] = None if offset is None else [offset]
            return out

        return self.client.run(go())

    def close(self) -> None:
        self.client.run(_stop(self.consumer))


class AiokafkaClient(Client):
    name = "aiokafka"
    FEATURES = frozenset(
        (ADMIN_FEATURES - {"admin.alter_configs"}) | {"admin.alter_configs_legacy"}
        | PRODUCE_FEATURES | CONSUME_FEATURES | {"group"}
    )

    SECURITY = frozenset({"SSL", "mTLS", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="compat-aiokafka", daemon=True)
        self.thread.start()
        self._admin: Any = None

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _get_admin(self) -> Any:
        from aiokafka.admin import AIOKafkaAdminClient

        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
            await admin.start()
            self._admin = admin
        return self._admin

    def reconnect(self) -> None:
        if self._admin is not None:
            self.run(self._admin.close())
            self._admin = None

    def close(self) -> None:
        self.reconnect()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        """aiokafka's keyword arguments: an ``ssl_context`` (aiokafka takes no file names),
        ``sasl_plain_username``/``_password`` (SCRAM too), and for OAUTHBEARER a token provider
        handing out an unsecured token."""
        from aiokafka.abc import AbstractTokenProvider
        from aiokafka.helpers import create_ssl_context

        config: dict[str, Any] = {"security_protocol": security.protocol}
        if security.tls:
            pair = security.certificate
            config["ssl_context"] = create_ssl_context(
                cafile=None if security.ca is None else str(security.ca),
                certfile=None if pair is None else str(pair.certificate),
                keyfile=None if pair is None else str(pair.key),
            )  # fmt: skip
        if security.mechanism == "OAUTHBEARER":

            class UnsecuredToken(AbstractTokenProvider):  # type: ignore[misc]
                async def token(self) -> str:
                    return security.unsecured_token()

            config |= {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": UnsecuredToken()}
        elif security.mechanism is not None:
            config |= {"sasl_mechanism": security.mechanism, "sasl_plain_username": security.username,
                       "sasl_plain_password": security.password}  # fmt: skip
        return config

    def connect(self, extra: dict[str, Any]) -> Json:
        """An AIOKafkaConsumer starts (bootstraps): None when it does, else the exception and
        what aiokafka logged as the cause (it raises only "Unable to bootstrap")."""
        from aiokafka import AIOKafkaConsumer

        async def go() -> Json:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=10000, **extra)
            with LoggedFailures("aiokafka") as logged:
                try:
                    await consumer.start()
                except Exception as exc:
                    return {"error": exception_name(exc), "message": str(exc), "logged": logged.messages}
                finally:
                    await _stop(consumer)
            return None

        return self.run(go())

    def _admin_call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            admin = await self._get_admin()
            return await getattr(admin, name)(*args, **kwargs)

        return self.run(call())

    def _topic_error(self, response: Any, key: str) -> Json:
        for row in response.to_object()[key]:
            if row["error_code"]:
                return err(code_name(row["error_code"]))
        return None

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 1,
        configs: dict[str, str] | None = None, validate_only: bool = False,
    ) -> Json:  # fmt: skip
        from aiokafka.admin import NewTopic

        topic = NewTopic(name, partitions, rf, topic_configs=configs or {})
        try:
            response = self._admin_call("create_topics", [topic], validate_only=validate_only)
        except Exception as exc:
            return err(exception_name(exc))
        return self._topic_error(response, "topic_errors")

    def delete_topic(self, name: str) -> Json:
        try:
            response = self._admin_call("delete_topics", [name])
        except Exception as exc:
            return err(exception_name(exc))
        return self._topic_error(response, "topic_error_codes")

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> Json:
        from aiokafka.admin import NewPartitions

        try:
            response = self._admin_call("create_partitions", {name: NewPartitions(total)}, validate_only=validate_only)
        except Exception as exc:
            return err(exception_name(exc))
        return self._topic_error(response, "topic_errors")

    def describe_topic(self, name: str) -> Json:
        (topic,) = self._admin_call("describe_topics", [name])
        if topic["error_code"]:
            return err(code_name(topic["error_code"]))
        return {
            "internal": topic["is_internal"],
            "partitions": [
                {"partition": p["partition"], "leader": p["leader"], "replicas": p["replicas"], "isr": p["isr"]}
                for p in sorted(topic["partitions"], key=lambda p: p["partition"])
            ],
        }

    def list_topics(self) -> Json:
        return sorted(self._admin_call("list_topics"))

    def describe_cluster(self) -> Json:
        c = self._admin_call("describe_cluster")
        nodes = sorted([b["node_id"], f"{b['host']}:{b['port']}"] for b in c["brokers"])
        return {"cluster_id": c["cluster_id"], "controller": c["controller_id"], "nodes": nodes}

    def describe_configs(
        self, kind: str, name: str, keys: list[str] | None = None, synonyms: bool = False
    ) -> Json:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        rtype = ConfigResourceType.BROKER if kind == "broker" else ConfigResourceType.TOPIC
        try:
            (response,) = self._admin_call("describe_configs", [ConfigResource(rtype, name)],
                                           include_synonyms=synonyms)  # fmt: skip
        except Exception as exc:
            return err(exception_name(exc))
        (resource,) = response.to_object()["resources"]
        if resource["error_code"]:
            return err(code_name(resource["error_code"]))
        out = {}
        for e in sorted(resource["config_entries"], key=lambda e: e["config_names"]):
            if keys is not None and e["config_names"] not in keys:
                continue
            row = {"value": e["config_value"], "source": e["config_source"], "read_only": e["read_only"],
                   "sensitive": e["is_sensitive"]}  # fmt: skip
            if synonyms:
                row["synonyms"] = [[s["config_name"], s["config_value"], s["config_source"]]
                                   for s in e["config_synonyms"]]  # fmt: skip
            out[e["config_names"]] = row
        return out

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> Json:
        """AlterConfigs (API 33): the topic's overrides become exactly ``configs``."""
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        (response,) = self._admin_call("alter_configs", [ConfigResource(ConfigResourceType.TOPIC, topic, configs)])
        (resource,) = response.to_object()["resources"]
        return err(code_name(resource["error_code"])) if resource["error_code"] else None

    def delete_records(self, topic: str, partition: int, before: int) -> Json:
        from aiokafka.admin import RecordsToDelete
        from aiokafka.structs import TopicPartition

        tp = TopicPartition(topic, partition)
        try:
            return self._admin_call("delete_records", {tp: RecordsToDelete(before)})[tp]
        except Exception as exc:
            return err(exception_name(exc))

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec) -> Json:
        """Through a consumer: beginning_offsets / end_offsets / offsets_for_times."""
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        async def query() -> Json:
            tp = TopicPartition(topic, partition)
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                if spec == "earliest":
                    return {"offset": (await consumer.beginning_offsets([tp]))[tp]}
                if spec == "latest":
                    return {"offset": (await consumer.end_offsets([tp]))[tp]}
                found = (await consumer.offsets_for_times({tp: spec}))[tp]
                return None if found is None else {"offset": found.offset, "timestamp": found.timestamp}
            except Exception as exc:
                return err(exception_name(exc))
            finally:
                await _stop(consumer)

        return self.run(query())

    # --- data --------------------------------------------------------------------------------
    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        from aiokafka import AIOKafkaProducer

        async def go() -> Json:
            config: dict[str, Any] = {
                "acks": {"all": "all", "1": 1, "0": 0}[acks], "linger_ms": 5, "request_timeout_ms": 10000,
                "compression_type": None if codec == "none" else codec, **(extra or {}),
            }  # fmt: skip
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **config)
            await producer.start()
            futures: list[Any] = []
            try:
                for r in records:
                    try:
                        fut = await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                                  timestamp_ms=r.timestamp, headers=list(r.headers))  # fmt: skip
                    except Exception as exc:
                        futures.append(err(exception_name(exc)))
                        continue
                    futures.append(fut)
                    if sync:
                        await asyncio.wait([fut], timeout=TIMEOUT_S)
                out: list[Json] = []
                for f in futures:
                    if isinstance(f, dict):
                        out.append(f)
                        continue
                    try:
                        metadata = await asyncio.wait_for(f, TIMEOUT_S)
                        out.append(None if metadata is None else metadata.offset)  # None: acks=0
                    except Exception as exc:
                        out.append(err(exception_name(exc)))
                return out
            finally:
                await _stop(producer)

        return self.run(go())

    def group_member(self, topic: str, group: str, protocol: str = "classic") -> GroupMember:
        if protocol != "classic":
            raise Unsupported("aiokafka speaks the classic group protocol only")
        return AiokafkaMember(self, topic, group)

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        s = settings or FetchSettings()
        config: dict[str, Any] = {"group_id": None, "enable_auto_commit": False,
                                  "auto_offset_reset": s.reset or "earliest"}  # fmt: skip
        config.update(fetch_config(s, FETCH_NAMES))

        async def go() -> Json:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, **config)
            await consumer.start()
            tps = [TopicPartition(topic, p) for p in partitions]
            got: list[Json] = []
            result: dict[str, Json] = {"records": got}
            try:
                consumer.assign(tps)
                # Explicit offsets, not seek_to_beginning/seek_to_end: those race with the
                # default-policy reset aiokafka starts on assign() (its reply can land after
                # seek_to_end and win), which made "start at the end" read from 0 at random.
                if start == "earliest":
                    targets = await consumer.beginning_offsets(tps)
                elif start == "latest":
                    targets = await consumer.end_offsets(tps)
                elif isinstance(start, dict):
                    found = await consumer.offsets_for_times({tp: start["timestamp"] for tp in tps})
                    ends = await consumer.end_offsets(tps)
                    targets = {tp: ends[tp] if found.get(tp) is None else found[tp].offset for tp in tps}
                else:
                    targets = {tp: start for tp in tps}
                for tp in tps:
                    consumer.seek(tp, targets[tp])
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    if max_records is not None and len(got) >= max_records:
                        break
                    if until is not None:
                        behind = [tp for tp in tps if tp.partition in until
                                  and await consumer.position(tp) < until[tp.partition]]
                        if not behind:
                            break
                    if until_moved and all([await consumer.position(tp) != start for tp in tps]):
                        break
                    batches = await consumer.getmany(timeout_ms=100)
                    for tp_records in batches.values():
                        for m in tp_records:
                            got.append(record(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                              m.timestamp, "LogAppendTime" if m.timestamp_type == 1 else "CreateTime"))
                del got[max_records if max_records is not None else len(got):]
                if until_moved:
                    result["positions"] = {str(tp.partition): await consumer.position(tp) for tp in tps}
            except Exception as exc:
                result["error"] = exception_name(exc)
            finally:
                await _stop(consumer)
            return result

        return self.run(go(), timeout=timeout_s + 30)
