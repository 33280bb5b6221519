"""The Java client adapter: kafka-clients' Admin, KafkaProducer and KafkaConsumer (assign).

Every operation is one request to the ``CompatDriver`` JVM (see ``java_driver.py``);
bytes travel base64-encoded and come back in the same record shape as the Python clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat.clients.base import (
    ADMIN_FEATURES,
    CONSUME_FEATURES,
    PRODUCE_FEATURES,
    FetchSettings,
    GroupMember,
    Json,
    Rec,
    Start,
    TxnProducer,
    Unsupported,
    fetch_config,
    record,
    unb64,
)
from compat.clients.driver_client import HANDLES, DriverClient, DriverMember, wire
from compat.clients.java_driver import JavaDriver

if TYPE_CHECKING:
    from compat.security.client_security import ClientSecurity

JAVA_SECURITY = frozenset({"SSL", "mTLS", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})

def java_security(security: ClientSecurity) -> dict[str, str]:
    """kafka-clients' keys for ``security`` (the Java client and Kafka's CLI tools): PEM
    truststore and keystore files (KIP-651) and a ``sasl.jaas.config`` line."""
    config = {"security.protocol": security.protocol}
    if security.ca is not None:
        config |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(security.ca)}
    if security.certificate is not None:
        config |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(security.certificate.keystore)}
    if security.mechanism is not None:
        config |= {"sasl.mechanism": security.mechanism, "sasl.jaas.config": security.client_jaas()}
    return config


FETCH_NAMES = {  # FetchSettings field -> this client's consumer config key
    "min_bytes": "fetch.min.bytes",
    "max_wait_ms": "fetch.max.wait.ms",
    "max_bytes": "fetch.max.bytes",
    "partition_max_bytes": "max.partition.fetch.bytes",
    "isolation": "isolation.level",
}


class JavaClient(DriverClient):
    name = "java"
    FEATURES = frozenset(
        ADMIN_FEATURES | {"list_offsets.max_timestamp", "list_offsets.isolation", "transactions"} | PRODUCE_FEATURES
        | CONSUME_FEATURES | {"group", "group.consumer_protocol", "group.admin", "group.delete_offsets",
                              "group.assign"}
    )

    SECURITY = JAVA_SECURITY

    def make_driver(self, workdir: Path) -> JavaDriver:
        return JavaDriver(workdir)

    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        return dict(java_security(security))

    def connect(self, extra: dict[str, Any]) -> Json:
        return self._call("connect", props=extra, timeout=60)

    def describe_cluster(self) -> Json:
        c = self._call("describe_cluster")
        if "error" in c:
            return c
        c["nodes"] = sorted([n[0], f"{n[1]}:{n[2]}"] for n in c["nodes"])
        return c

    def transactional_producer(self, transactional_id: str) -> TxnProducer:
        return JavaTxnProducer(self, transactional_id)

    # --- groups ------------------------------------------------------------------------------
    def group_member(self, topic: str, group: str, protocol: str = "classic") -> GroupMember:
        return JavaMember(self, topic, group, protocol)

    def assigned_member(self, topic: str, group: str, protocol: str, partitions: list[int]) -> GroupMember:
        return JavaMember(self, topic, group, protocol, partitions)

    def list_groups(self, state: str | None = None) -> Json:
        if state is not None:
            raise Unsupported("list_groups state filter")
        return self._call("list_groups")

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        s = settings or FetchSettings()
        props: dict[str, Any] = {"auto.offset.reset": s.reset or "earliest"}
        props.update(fetch_config(s, FETCH_NAMES))
        raw = self._call(
            "consume", topic=topic, partitions=partitions, start=start, props=props,
            until={str(k): v for k, v in (until or {}).items()} if until is not None else None,
            max_records=max_records, timeout_ms=int(timeout_s * 1000), timeout=timeout_s + 60,
            until_moved=until_moved,
        )  # fmt: skip
        out: dict[str, Json] = {
            "records": [
                record(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                       [(k, unb64(v)) for k, v in r["headers"]], r["timestamp"], r["timestamp_type"])
                for r in raw["records"]
            ]
        }  # fmt: skip
        if until_moved:
            out["positions"] = raw["positions"]
        if "error" in raw:
            out["error"] = raw["error"]
        return out


class JavaMember(DriverMember):
    """A KafkaConsumer subscribed in a group (classic, or group.protocol=consumer), or with
    ``assign`` assigned those partitions, kept in the driver JVM under a handle between requests.
    One JVM serves all members, so they poll in turn (the Java consumer's poll honours its
    timeout during a rebalance)."""

    def __init__(self, client: JavaClient, topic: str, group: str, protocol: str,
                 assign: list[int] | None = None) -> None:
        self.client, self.topic = client, topic
        self.handle = f"{group}#{next(HANDLES)}"
        props = {"group.id": group, "group.protocol": protocol, "fetch.max.wait.ms": 100}
        if protocol == "classic":  # the consumer protocol takes these from the broker
            props.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self._step("open", props=props, assign=assign)


class JavaTxnProducer(TxnProducer):
    """KafkaProducer with transactional.id (initTransactions/begin/commit/abortTransaction),
    kept in the driver JVM under a handle between requests."""

    def __init__(self, client: JavaClient, transactional_id: str) -> None:
        self.client = client
        self.handle = f"{transactional_id}#{next(HANDLES)}"  # two producers may share a transactional.id
        self.init = self._step("init", props={"transactional.id": transactional_id})

    def _step(self, step: str, **args: Any) -> Json:
        return self.client._call("txn", handle=self.handle, step=step, **args)

    def begin(self) -> Json:
        return self._step("begin") if self.init is None else self.init

    def send(self, topic: str, records: list[Rec]) -> Json:
        return self._step("send", topic=topic, records=wire(records))

    def commit(self) -> Json:
        return self._step("commit")

    def abort(self) -> Json:
        return self._step("abort")

    def close(self) -> None:
        self._step("close")
