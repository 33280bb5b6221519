"""The deny matrix (issue #18): every API a client exposes, run by a principal without the ACL it
needs and then with it, on Apache Kafka 4.3.1 and on kbroker configured identically.

Both brokers run ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``
with PLAINTEXT listeners, so every client is ``User:ANONYMOUS``. Managing ACLs needs ALTER and
DESCRIBE on the cluster and a combined node's own broker needs CLUSTER_ACTION (its heartbeats come
in as ANONYMOUS too), so ANONYMOUS keeps those three. Nothing could grant the first ACL with
``allow.everyone.if.no.acl.found=false`` and no super user; the brokers run with ``true`` and an
ACL for ``User:nobody`` on the wildcard Topic, Group and TransactionalId resources, so every
resource has ACLs and, by Kafka's per-resource rule, ANONYMOUS is denied whatever no ACL allows
it: the same decisions as ``false``.

The run, per broker: set-up under a temporary grant of everything (topics, records, a group's
committed offsets), recorded state; every case without its ACL; the state again, which must be
unchanged; every case with its ACLs (added, waited for, removed after). A case's outcome is the
error the client surfaces (its protocol name) or ``ok``. ``run_matrix`` returns the rows and
``markdown`` renders the table written to compat/ACL_MATRIX.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.clients.confluent import exc_name, kafka_error_name
from compat.clients.java_cli import CONFIGS, CONSUMER, DELETE_RECORDS, GROUPS, OFFSETS, PRODUCER, TOPICS, JavaCliClient
from compat.harness import wait_until
from compat.targets import Target

AUTHORIZER_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    # One partition for each internal topic: a fresh coordinator is ready sooner on both.
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}
ANONYMOUS = "User:ANONYMOUS"
ACL_WAIT_S = 30.0
TIMEOUT_S = 30.0
READ_WINDOW_S = 10.0

# Resources the cases use (one each where a success changes it).
DATA, DELETED, PARTITIONED, CONFIGURED, TRIMMED, CREATED = "m-data", "m-delete", "m-parts", "m-conf", "m-rec", "m-new"
GROUP, DELETED_GROUP, JOINED_GROUP, TXN = "m-group", "m-gdel", "m-join", "m-txn"
ALTERED_KEY = "retention.ms"


@dataclass(frozen=True)
class Grant:
    """One ALLOW ACL for ANONYMOUS: resource type name (confluent's ResourceType), name, operation."""

    resource: str
    name: str
    operation: str
    pattern: str = "LITERAL"


@dataclass(frozen=True)
class Case:
    client: str  # "confluent" or "java-cli" (the Java client, through Kafka's own tools)
    api: str
    needs: tuple[Grant, ...]
    expected: str  # the error Kafka documents for the missing ACL
    action: Callable[[Context], Any]
    given: tuple[Grant, ...] = ()  # ACLs in force in both runs (the case lacks only ``needs``)


@dataclass
class Context:
    target: Target
    admin: Any
    cli: JavaCliClient

    @property
    def bootstrap(self) -> str:
        return self.target.bootstrap


# --- ACLs ----------------------------------------------------------------------------------


def _binding(grant: Grant, principal: str = ANONYMOUS) -> Any:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(getattr(ResourceType, grant.resource), grant.name, getattr(ResourcePatternType, grant.pattern),
                      principal, "*", getattr(AclOperation, grant.operation), AclPermissionType.ALLOW)


def _filter(grant: Grant, principal: str = ANONYMOUS) -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(getattr(ResourceType, grant.resource), grant.name,
                            getattr(ResourcePatternType, grant.pattern), principal, "*",
                            getattr(AclOperation, grant.operation), AclPermissionType.ALLOW)


def _described(ctx: Context) -> set[str]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    return {str(b) for b in ctx.admin.describe_acls(every).result(timeout=TIMEOUT_S)}


def grant(ctx: Context, grants: tuple[Grant, ...], principal: str = ANONYMOUS) -> None:
    """Add the ACLs and wait until the broker answers them (its authorizer has them then)."""
    if not grants:
        return
    bindings = [_binding(g, principal) for g in grants]
    for future in ctx.admin.create_acls(bindings).values():
        future.result(timeout=TIMEOUT_S)
    wanted = {str(b) for b in bindings}
    ok, seen = wait_until(lambda: _described(ctx), lambda got: wanted <= got, ACL_WAIT_S)
    assert ok, f"ACLs not in force on {ctx.target.name} after {ACL_WAIT_S} s: {wanted - seen}"


def revoke(ctx: Context, grants: tuple[Grant, ...]) -> None:
    if not grants:
        return
    for future in ctx.admin.delete_acls([_filter(g) for g in grants]).values():
        future.result(timeout=TIMEOUT_S)
    gone = {str(_binding(g)) for g in grants}
    ok, seen = wait_until(lambda: _described(ctx), lambda got: not gone & got, ACL_WAIT_S)
    assert ok, f"ACLs still in force on {ctx.target.name}: {gone & seen}"


HARNESS = (Grant("BROKER", "kafka-cluster", "ALTER"), Grant("BROKER", "kafka-cluster", "DESCRIBE"),
           Grant("BROKER", "kafka-cluster", "CLUSTER_ACTION"))
PLACEHOLDERS = (Grant("TOPIC", "*", "READ"), Grant("GROUP", "*", "READ"), Grant("TRANSACTIONAL_ID", "*", "WRITE"))
EVERYTHING = (Grant("TOPIC", "*", "ALL"), Grant("GROUP", "*", "ALL"), Grant("TRANSACTIONAL_ID", "*", "ALL"),
              Grant("BROKER", "kafka-cluster", "CREATE"), Grant("BROKER", "kafka-cluster", "IDEMPOTENT_WRITE"))


# --- what the cases do (confluent-kafka) ------------------------------------------------------


def _future(call: Callable[[], Any]) -> str:
    try:
        result = call()
        futures = result.values() if isinstance(result, dict) else [result]
        for future in futures:
            answer = future.result(timeout=TIMEOUT_S)
            # Group offset answers carry an error per partition instead of failing.
            for tp in getattr(answer, "topic_partitions", None) or ():
                if tp.error is not None:
                    return kafka_error_name(tp.error)
        return "ok"
    except Exception as exc:  # the client's error for the case is the outcome
        return exc_name(exc)


def _produce(ctx: Context, topic: str, **config: Any) -> str:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": ctx.bootstrap, "message.timeout.ms": 15000, **config})
    outcomes: list[str] = []
    try:
        if config.get("transactional.id"):
            producer.init_transactions(TIMEOUT_S)
            producer.begin_transaction()
        producer.produce(topic, b"value", key=b"key",
                         on_delivery=lambda err, _msg: outcomes.append(kafka_error_name(err) if err else "ok"))
        producer.flush(TIMEOUT_S)
        if config.get("transactional.id") and outcomes == ["ok"]:
            producer.commit_transaction(TIMEOUT_S)
    except Exception as exc:
        return exc_name(exc)
    return outcomes[0] if outcomes else "no delivery report"


def _consumer(ctx: Context, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "enable.partition.eof": True})


def _consume(ctx: Context) -> str:
    """Read the topic from the start with assign() (committed offsets come from the group)."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(ctx, GROUP)
    try:
        consumer.assign([TopicPartition(DATA, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                name = kafka_error_name(message.error())
                if name != "_PARTITION_EOF":
                    return name
                return "ok"
        return "timed out"
    finally:
        consumer.close()


def _subscribe(ctx: Context) -> str:
    """Join a group subscribed to the topic and read its first record."""
    consumer = _consumer(ctx, JOINED_GROUP)
    try:
        consumer.subscribe([DATA])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            name = "ok" if message.error() is None else kafka_error_name(message.error())
            return "ok" if name == "_PARTITION_EOF" else name
        return "timed out"
    except Exception as exc:
        return exc_name(exc)
    finally:
        consumer.close()


def _offsets_in_transaction(ctx: Context) -> str:
    """A transaction that commits a group's offsets (AddOffsetsToTxn, TxnOffsetCommit)."""
    from confluent_kafka import Producer, TopicPartition

    producer = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": TXN})
    consumer = _consumer(ctx, GROUP)
    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(DATA, 0, 2)], consumer.consumer_group_metadata(),
                                             TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        return "ok"
    except Exception as exc:
        return exc_name(exc)
    finally:
        consumer.close()


def _commit(ctx: Context) -> str:
    from confluent_kafka import TopicPartition

    consumer = _consumer(ctx, GROUP)
    try:
        consumer.commit(offsets=[TopicPartition(DATA, 0, 2)], asynchronous=False)
        return "ok"
    except Exception as exc:
        return exc_name(exc)
    finally:
        consumer.close()


def _listed(ctx: Context) -> str:
    topics = ctx.admin.list_topics(timeout=TIMEOUT_S).topics
    return "ok" if DATA in topics else "not listed"


def _operations(ctx: Context, kind: str) -> str:
    """``ok: <operations>``: the authorized operations a describe answers for the topic or group."""
    from confluent_kafka import TopicCollection

    try:
        if kind == "topic":
            futures = ctx.admin.describe_topics(TopicCollection([DATA]), include_authorized_operations=True,
                                                request_timeout=TIMEOUT_S)
        else:
            futures = ctx.admin.describe_consumer_groups([GROUP], include_authorized_operations=True,
                                                         request_timeout=TIMEOUT_S)
        [description] = [f.result(timeout=TIMEOUT_S) for f in futures.values()]
    except Exception as exc:
        return exc_name(exc)
    return "ok: " + ",".join(sorted(op.name for op in description.authorized_operations or ()))


def _admin(ctx: Context, method: str, *args: Any, **kwargs: Any) -> str:
    return _future(lambda: getattr(ctx.admin, method)(*args, request_timeout=TIMEOUT_S, **kwargs))


def confluent_cases() -> list[Case]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    topic = "TOPIC"
    altered = ConfigResource(ResourceType.TOPIC, CONFIGURED, incremental_configs=[
        ConfigEntry(ALTERED_KEY, "3600000", incremental_operation=AlterConfigOpType.SET)])
    return [
        Case("confluent", "produce", (Grant(topic, DATA, "WRITE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _produce(c, DATA)),
        Case("confluent", "produce (idempotent)", (Grant(topic, DATA, "WRITE"),), "CLUSTER_AUTHORIZATION_FAILED",
             lambda c: _produce(c, DATA, **{"enable.idempotence": True})),
        Case("confluent", "produce (transactional)",
             (Grant("TRANSACTIONAL_ID", TXN, "WRITE"), Grant(topic, DATA, "WRITE")),
             "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", lambda c: _produce(c, DATA, **{"transactional.id": TXN})),
        Case("confluent", "produce (transactional), topic not allowed", (Grant(topic, DATA, "WRITE"),),
             "TOPIC_AUTHORIZATION_FAILED", lambda c: _produce(c, DATA, **{"transactional.id": TXN}),
             given=(Grant("TRANSACTIONAL_ID", TXN, "WRITE"),)),
        Case("confluent", "send offsets to transaction", (Grant("GROUP", GROUP, "READ"), Grant(topic, DATA, "READ")),
             "GROUP_AUTHORIZATION_FAILED", _offsets_in_transaction, given=(Grant("TRANSACTIONAL_ID", TXN, "WRITE"),)),
        Case("confluent", "subscribe (join group)", (Grant(topic, DATA, "READ"), Grant("GROUP", JOINED_GROUP, "READ")),
             "GROUP_AUTHORIZATION_FAILED", _subscribe),
        Case("confluent", "consume (assign)", (Grant(topic, DATA, "READ"), Grant("GROUP", GROUP, "READ")),
             "TOPIC_AUTHORIZATION_FAILED", _consume),
        Case("confluent", "commit offsets", (Grant(topic, DATA, "READ"), Grant("GROUP", GROUP, "READ")),
             "GROUP_AUTHORIZATION_FAILED", _commit),
        Case("confluent", "list topics (metadata)", (Grant(topic, DATA, "DESCRIBE"),), "not listed", _listed),
        Case("confluent", "create topic", (Grant("BROKER", "kafka-cluster", "CREATE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "create_topics", [NewTopic(CREATED, 1, 1)])),
        Case("confluent", "delete topic", (Grant(topic, DELETED, "DELETE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "delete_topics", [DELETED])),
        Case("confluent", "create partitions", (Grant(topic, PARTITIONED, "ALTER"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "create_partitions", [NewPartitions(PARTITIONED, 2)])),
        Case("confluent", "describe configs", (Grant(topic, CONFIGURED, "DESCRIBE_CONFIGS"),),
             "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "describe_configs", [ConfigResource(ResourceType.TOPIC, CONFIGURED)])),
        Case("confluent", "incremental alter configs", (Grant(topic, CONFIGURED, "ALTER_CONFIGS"),),
             "TOPIC_AUTHORIZATION_FAILED", lambda c: _admin(c, "incremental_alter_configs", [altered])),
        Case("confluent", "delete records", (Grant(topic, TRIMMED, "DELETE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "delete_records", [TopicPartition(TRIMMED, 0, 1)])),
        Case("confluent", "list offsets", (Grant(topic, DATA, "DESCRIBE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "list_offsets", {TopicPartition(DATA, 0): OffsetSpec.latest()})),
        Case("confluent", "describe topics (authorized operations)", (Grant(topic, DATA, "READ"),),
             "TOPIC_AUTHORIZATION_FAILED", lambda c: _operations(c, "topic")),
        Case("confluent", "describe groups (authorized operations)", (Grant("GROUP", GROUP, "READ"),),
             "GROUP_AUTHORIZATION_FAILED", lambda c: _operations(c, "group")),
        Case("confluent", "describe consumer groups", (Grant("GROUP", GROUP, "DESCRIBE"),),
             "GROUP_AUTHORIZATION_FAILED", lambda c: _admin(c, "describe_consumer_groups", [GROUP])),
        Case("confluent", "list consumer group offsets",
             (Grant("GROUP", GROUP, "DESCRIBE"), Grant(topic, DATA, "DESCRIBE")), "GROUP_AUTHORIZATION_FAILED",
             lambda c: _admin(c, "list_consumer_group_offsets", [ConsumerGroupTopicPartitions(GROUP)])),
        Case("confluent", "alter consumer group offsets", (Grant("GROUP", GROUP, "READ"), Grant(topic, DATA, "READ")),
             "GROUP_AUTHORIZATION_FAILED", lambda c: _admin(c, "alter_consumer_group_offsets", [
                 ConsumerGroupTopicPartitions(GROUP, [TopicPartition(DATA, 0, 1)])])),
        Case("confluent", "delete consumer groups", (Grant("GROUP", DELETED_GROUP, "DELETE"),),
             "GROUP_AUTHORIZATION_FAILED", lambda c: _admin(c, "delete_consumer_groups", [DELETED_GROUP])),
    ]


# --- what the cases do (Kafka's tools: the Java client) -------------------------------------


def _tool(ctx: Context, main: str, *args: str, stdin: str = "") -> str:
    """``ok`` when the tool exits 0 with no exception printed; else the first Kafka exception
    class it names (``TopicAuthorizationException``, as the user reads it), or its first line
    of output (the address of the broker replaced)."""
    out = ctx.cli.run(main, *args, stdin=stdin)
    lines = [line.strip() for line in out["stdout"] + out["stderr"] if line.strip()]
    for word in " ".join(lines).replace(":", " ").split():
        if word.endswith("Exception") and "errors." in word:
            return word.rsplit(".", 1)[-1]
    if out["exit"] == 0:
        return "ok"
    first = re.sub(r"\[\d{4}-[^]]*\] ", "", lines[0]) if lines else ""
    return f"exit {out['exit']}: " + re.sub(r"127\.0\.0\.1:\d+", "<broker>", first)


def java_cases() -> list[Case]:
    topic = "TOPIC"
    return [
        Case("java-cli", "kafka-console-producer", (Grant(topic, DATA, "WRITE"),), "TopicAuthorizationException",
             lambda c: _tool(c, PRODUCER, "--topic", DATA, "--producer-property", "enable.idempotence=false",
                             "--producer-property", "max.block.ms=10000", stdin="v\n")),
        Case("java-cli", "kafka-console-consumer", (Grant(topic, DATA, "READ"), Grant("GROUP", GROUP, "READ")),
             "TopicAuthorizationException",
             lambda c: _tool(c, CONSUMER, "--topic", DATA, "--group", GROUP, "--from-beginning", "--max-messages",
                             "1", "--timeout-ms", "15000")),
        Case("java-cli", "kafka-topics --create", (Grant("BROKER", "kafka-cluster", "CREATE"),),
             "TopicAuthorizationException", lambda c: _tool(c, TOPICS, "--create", "--topic", CREATED + "-j",
                                                            "--partitions", "1", "--replication-factor", "1")),
        Case("java-cli", "kafka-topics --delete", (Grant(topic, DELETED + "-j", "DELETE"),),
             "TopicAuthorizationException", lambda c: _tool(c, TOPICS, "--delete", "--topic", DELETED + "-j")),
        Case("java-cli", "kafka-topics --alter --partitions", (Grant(topic, PARTITIONED + "-j", "ALTER"),),
             "TopicAuthorizationException",
             lambda c: _tool(c, TOPICS, "--alter", "--topic", PARTITIONED + "-j", "--partitions", "2")),
        Case("java-cli", "kafka-configs --alter", (Grant(topic, CONFIGURED, "ALTER_CONFIGS"),),
             "TopicAuthorizationException",
             lambda c: _tool(c, CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", CONFIGURED,
                             "--add-config", f"{ALTERED_KEY}=7200000")),
        Case("java-cli", "kafka-configs --describe", (Grant(topic, CONFIGURED, "DESCRIBE_CONFIGS"),),
             "TopicAuthorizationException",
             lambda c: _tool(c, CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", CONFIGURED)),
        Case("java-cli", "kafka-delete-records", (Grant(topic, TRIMMED + "-j", "DELETE"),),
             "TopicAuthorizationException", lambda c: _delete_records_tool(c)),
        Case("java-cli", "kafka-get-offsets", (Grant(topic, DATA, "DESCRIBE"),), "TopicAuthorizationException",
             lambda c: _tool(c, OFFSETS, "--topic", DATA)),
        Case("java-cli", "kafka-consumer-groups --describe", (Grant("GROUP", GROUP, "DESCRIBE"),
                                                              Grant(topic, DATA, "DESCRIBE")),
             "GroupAuthorizationException", lambda c: _tool(c, GROUPS, "--describe", "--group", GROUP)),
        Case("java-cli", "kafka-consumer-groups --delete", (Grant("GROUP", DELETED_GROUP + "-j", "DELETE"),),
             "GroupAuthorizationException", lambda c: _tool(c, GROUPS, "--delete", "--group", DELETED_GROUP + "-j")),
    ]


def _delete_records_tool(ctx: Context) -> str:
    spec = ctx.cli.workdir / "delete-records.json"
    spec.write_text('{"partitions": [{"topic": "%s", "partition": 0, "offset": 1}], "version": 1}' % (TRIMMED + "-j"))
    return _tool(ctx, DELETE_RECORDS, "--offset-json-file", str(spec))


# --- what the cases do (kafka-python) ----------------------------------------------------------


def _python_error(exc: BaseException | type) -> str:
    """kafka-python's error class name (it reports some errors as classes, some as instances)."""
    return exc.__name__ if isinstance(exc, type) else type(exc).__name__


def _python(call: Callable[[], Any]) -> str:
    try:
        call()
        return "ok"
    except Exception as exc:
        return _python_error(exc)


def _python_produce(ctx: Context) -> str:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=ctx.bootstrap, max_block_ms=10000, retries=0)
    try:
        return _python(lambda: producer.send(DATA, b"value").get(timeout=TIMEOUT_S))
    finally:
        producer.close(timeout=5)


def _python_consume(ctx: Context) -> str:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=ctx.bootstrap, group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(DATA, 0)])
        # kafka-python retries a topic it may not read until its poll gives up: a short window.
        deadline = time.monotonic() + READ_WINDOW_S
        while time.monotonic() < deadline:
            try:
                if any(consumer.poll(timeout_ms=1000).values()):
                    return "ok"
            except Exception as exc:
                return _python_error(exc)
        return "timed out"
    finally:
        consumer.close()


def _python_admin(ctx: Context, call: Callable[[Any], Any]) -> str:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        return _python(lambda: call(admin))
    finally:
        admin.close()


def python_cases() -> list[Case]:
    from kafka import TopicPartition
    from kafka.admin import NewPartitions, NewTopic

    topic = "TOPIC"
    return [
        Case("kafka-python", "produce", (Grant(topic, DATA, "WRITE"),), "TOPIC_AUTHORIZATION_FAILED", _python_produce),
        Case("kafka-python", "consume (assign)", (Grant(topic, DATA, "READ"),), "TOPIC_AUTHORIZATION_FAILED",
             _python_consume),
        Case("kafka-python", "create topics", (Grant("BROKER", "kafka-cluster", "CREATE"),),
             "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _python_admin(c, lambda a: a.create_topics([NewTopic(CREATED + "-p", 1, 1)]))),
        Case("kafka-python", "delete topics", (Grant(topic, DELETED + "-p", "DELETE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _python_admin(c, lambda a: a.delete_topics([DELETED + "-p"]))),
        Case("kafka-python", "create partitions", (Grant(topic, PARTITIONED + "-p", "ALTER"),),
             "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _python_admin(c, lambda a: a.create_partitions({PARTITIONED + "-p": NewPartitions(2)}))),
        Case("kafka-python", "delete records", (Grant(topic, TRIMMED + "-p", "DELETE"),), "TOPIC_AUTHORIZATION_FAILED",
             lambda c: _python_admin(c, lambda a: a.delete_records({TopicPartition(TRIMMED + "-p", 0): 1}))),
    ]


# --- set-up and state -------------------------------------------------------------------------


def _committed(consumer: Any) -> str:
    from confluent_kafka import TopicPartition

    try:
        consumer.commit(offsets=[TopicPartition(DATA, 0, 1)], asynchronous=False)
        return "ok"
    except Exception as exc:
        return exc_name(exc)


def set_up(ctx: Context) -> None:
    """The harness's own ACLs, then (under a temporary grant of everything) the topics, records and
    group offsets the cases use."""
    from confluent_kafka.admin import NewTopic

    grant(ctx, HARNESS)
    grant(ctx, PLACEHOLDERS, principal="User:nobody")
    grant(ctx, EVERYTHING)
    topics = [DATA, DELETED, PARTITIONED, CONFIGURED, TRIMMED, *(f"{base}-{suffix}" for base in (
        DELETED, PARTITIONED, TRIMMED) for suffix in ("j", "p"))]
    for future in ctx.admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(timeout=TIMEOUT_S)
    for name in (DATA, TRIMMED, TRIMMED + "-j", TRIMMED + "-p"):
        for _ in range(3):
            assert _produce(ctx, name) == "ok"
    # Kafka's broker has the controller create __transaction_state as the client's principal
    # (CREATE on it, which no case grants): a transaction here makes it exist before the cases.
    assert _produce(ctx, DATA, **{"transactional.id": TXN + "-set-up"}) == "ok"
    for group in (GROUP, DELETED_GROUP, DELETED_GROUP + "-j"):
        consumer = _consumer(ctx, group)
        try:
            # A fresh __consumer_offsets partition answers NOT_COORDINATOR until it has loaded.
            ok, last = wait_until(lambda c=consumer: _committed(c), lambda outcome: outcome == "ok", TIMEOUT_S)
            assert ok, f"cannot commit {group}'s offsets on {ctx.target.name}: {last}"
        finally:
            consumer.close()
    revoke(ctx, EVERYTHING)


def state(ctx: Context) -> dict[str, Any]:
    """What a denied case must leave as it was (read under a temporary grant of everything)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

    grant(ctx, EVERYTHING)
    try:
        metadata = ctx.admin.list_topics(timeout=TIMEOUT_S).topics
        ends = ctx.admin.list_offsets({TopicPartition(t, 0): OffsetSpec.latest() for t in (DATA, TRIMMED)})
        starts = ctx.admin.list_offsets({TopicPartition(t, 0): OffsetSpec.earliest()
                                         for t in (TRIMMED, TRIMMED + "-j", TRIMMED + "-p")})
        config = ctx.admin.describe_configs([ConfigResource(ResourceType.TOPIC, CONFIGURED)])
        groups = {}
        for group in (GROUP, DELETED_GROUP, DELETED_GROUP + "-j"):
            answer = ctx.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            groups[group] = sorted((tp.topic, tp.partition, tp.offset)
                                   for result in answer.values() for tp in result.result().topic_partitions)
        return {
            "topics": sorted(t for t in metadata if t.startswith("m-")),
            "partitions": {t: len(metadata[t].partitions) for t in metadata if t.startswith("m-")},
            "end offsets": {tp.topic: f.result().offset for tp, f in ends.items()},
            "start offsets": {tp.topic: f.result().offset for tp, f in starts.items()},
            ALTERED_KEY: next(iter(config.values())).result()[ALTERED_KEY].value,
            "group offsets": groups,
        }
    finally:
        revoke(ctx, EVERYTHING)


@dataclass
class Row:
    client: str
    api: str
    needs: str
    expected: str
    denied: dict[str, str]  # broker -> outcome without the ACLs
    allowed: dict[str, str]  # broker -> outcome with them


def run_on(target: Target, workdir: Path, cases: list[Case]) -> tuple[dict[str, tuple[str, str]], dict[str, Any]]:
    """Every case on one broker: (denied, allowed) outcomes by case, and the state before and
    after the denied runs."""
    from confluent_kafka.admin import AdminClient

    ctx = Context(target, AdminClient({"bootstrap.servers": target.bootstrap}), JavaCliClient(target.bootstrap,
                                                                                             workdir / "cli"))
    try:
        set_up(ctx)
        before = state(ctx)
        denied = {}
        for case in cases:
            grant(ctx, case.given)
            denied[f"{case.client} {case.api}"] = case.action(ctx)
            revoke(ctx, case.given)
        after = state(ctx)
        allowed = {}
        for case in cases:
            grant(ctx, case.given + case.needs)
            allowed[f"{case.client} {case.api}"] = case.action(ctx)
            revoke(ctx, case.given + case.needs)
        outcomes = {key: (denied[key], allowed[key]) for key in denied}
        return outcomes, {"before": before, "after": after}
    finally:
        ctx.cli.close()


def describe_needs(needs: tuple[Grant, ...], given: tuple[Grant, ...] = ()) -> str:
    text = ", ".join(f"{g.operation} {g.resource.replace('BROKER', 'Cluster').title()}:{g.name}" for g in needs)
    return f"{text} (holding {describe_needs(given)})" if given else text


def rows(cases: list[Case], kafka: dict[str, tuple[str, str]], kbroker: dict[str, tuple[str, str]]) -> list[Row]:
    out = []
    for case in cases:
        key = f"{case.client} {case.api}"
        out.append(Row(case.client, case.api, describe_needs(case.needs, case.given), case.expected,
                       {"kafka": kafka[key][0], "kbroker": kbroker[key][0]},
                       {"kafka": kafka[key][1], "kbroker": kbroker[key][1]}))
    return out


def markdown(table: list[Row], unchanged: dict[str, bool]) -> str:
    same = sum(1 for r in table if r.denied["kafka"] == r.denied["kbroker"] and r.allowed["kafka"] == r.allowed[
        "kbroker"])
    lines = [
        "# Deny matrix (issue #18)",
        "",
        "Written by `tests/end_to_end/test_acls_deny_matrix.py` (compat/scenarios/acls.py): each API run by",
        "User:ANONYMOUS without the ACLs it needs, then with them, on Apache Kafka 4.3.1 and kbroker",
        "(StandardAuthorizer, every resource carrying ACLs). 'ok' is success ('ok: ...' lists the",
        "authorized operations a describe answered).",
        "",
        f"Cases: {len(table)}; identical on both brokers: {same}; state unchanged by the denied runs: "
        + ", ".join(f"{broker} {'yes' if ok else 'NO'}" for broker, ok in unchanged.items()),
        "",
        "'broker error' is what the broker answers for the missing ACL; the next columns are what the",
        "client surfaces (librdkafka asks for metadata or a coordinator first, a tool may report a",
        "hidden topic as missing).",
        "",
        "| client | API | ACLs needed | broker error | Kafka without | kbroker without | Kafka with |"
        " kbroker with |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(f"| {r.client} | {r.api} | {r.needs} | {r.expected} | {r.denied['kafka']} | "
                     f"{r.denied['kbroker']} | {r.allowed['kafka']} | {r.allowed['kbroker']} |")
    return "\n".join(lines) + "\n"
