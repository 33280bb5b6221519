"""The deny matrix's cases (issue #18): what each client does for one API — confluent-kafka,
Kafka's own tools (the Java client) and kafka-python — and the ACLs it needs.

A case's action returns the client's outcome: ``ok`` (``ok: ...`` for a describe answering the
authorized operations), the protocol error name librdkafka reports, the exception class a tool
prints (or its first line when it prints none), or kafka-python's error class. The runner and
the ACL bookkeeping are in compat/scenarios/acls.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from compat.clients.confluent import exc_name, kafka_error_name
from compat.clients.java_cli import CONFIGS, CONSUMER, DELETE_RECORDS, GROUPS, OFFSETS, PRODUCER, TOPICS
from compat.scenarios.acls import (
    ALTERED_KEY,
    CONFIGURED,
    CREATED,
    DATA,
    DELETED,
    DELETED_GROUP,
    GROUP,
    JOINED_GROUP,
    PARTITIONED,
    TIMEOUT_S,
    TRIMMED,
    TXN,
    Case,
    Context,
    Grant,
    group_consumer,
    produce_record,
)

# --- what the cases do (confluent-kafka) ------------------------------------------------------

# kafka-python retries a topic it may not read until its poll gives up: a short read window.
READ_WINDOW_S = 10.0


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


def _consume(ctx: Context) -> str:
    """Read the topic from the start with assign() (committed offsets come from the group)."""
    from confluent_kafka import TopicPartition

    consumer = group_consumer(ctx, GROUP)
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
    consumer = group_consumer(ctx, JOINED_GROUP)
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
    consumer = group_consumer(ctx, GROUP)
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

    consumer = group_consumer(ctx, GROUP)
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
    """``ok: <operations>``: the authorized operations a describe answers for the cluster, the topic
    or the group."""
    from confluent_kafka import TopicCollection

    try:
        if kind == "cluster":
            return "ok: " + ",".join(sorted(op.name for op in ctx.admin.describe_cluster(
                include_authorized_operations=True, request_timeout=TIMEOUT_S).result(
                timeout=TIMEOUT_S).authorized_operations or ()))
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
             lambda c: produce_record(c, DATA)),
        Case("confluent", "produce (idempotent)", (Grant(topic, DATA, "WRITE"),), "CLUSTER_AUTHORIZATION_FAILED",
             lambda c: produce_record(c, DATA, **{"enable.idempotence": True})),
        Case("confluent", "produce (transactional)",
             (Grant("TRANSACTIONAL_ID", TXN, "WRITE"), Grant(topic, DATA, "WRITE")),
             "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", lambda c: produce_record(c, DATA, **{"transactional.id": TXN})),
        Case("confluent", "produce (transactional), topic not allowed", (Grant(topic, DATA, "WRITE"),),
             "TOPIC_AUTHORIZATION_FAILED", lambda c: produce_record(c, DATA, **{"transactional.id": TXN}),
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
        Case("confluent", "describe cluster (authorized operations)", (Grant("BROKER", "kafka-cluster", "CREATE"),),
             "none (no check)", lambda c: _operations(c, "cluster")),
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
        Case("java-cli", "kafka-configs --alter --entity-type clients (quota)",
             (Grant("BROKER", "kafka-cluster", "ALTER_CONFIGS"),), "ClusterAuthorizationException",
             lambda c: _tool(c, CONFIGS, "--alter", "--entity-type", "clients", "--entity-name", "deny-matrix-app",
                             "--add-config", "producer_byte_rate=1048576")),
        Case("java-cli", "kafka-configs --describe --entity-type clients (quota)",
             (Grant("BROKER", "kafka-cluster", "DESCRIBE_CONFIGS"),), "ClusterAuthorizationException",
             lambda c: _tool(c, CONFIGS, "--describe", "--entity-type", "clients", "--entity-name", "deny-matrix-app")),
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
