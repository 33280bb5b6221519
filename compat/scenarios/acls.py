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
error the client surfaces (its protocol name, or the exception a tool prints) or ``ok``. The
cases — what each client does — are in compat/scenarios/acl_cases.py; ``run_on`` runs them on one
broker, ``rows`` pairs the two brokers' outcomes and ``markdown`` renders the table written to
compat/ACL_MATRIX.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.clients.confluent import exc_name, kafka_error_name
from compat.clients.java_cli import JavaCliClient
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


# --- clients the set-up uses ----------------------------------------------------------------


def produce_record(ctx: Context, topic: str, **config: Any) -> str:
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


def group_consumer(ctx: Context, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "enable.partition.eof": True})


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
            assert produce_record(ctx, name) == "ok"
    # Kafka's broker has the controller create __transaction_state as the client's principal
    # (CREATE on it, which no case grants): a transaction here makes it exist before the cases.
    assert produce_record(ctx, DATA, **{"transactional.id": TXN + "-set-up"}) == "ok"
    for group in (GROUP, DELETED_GROUP, DELETED_GROUP + "-j"):
        consumer = group_consumer(ctx, group)
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
