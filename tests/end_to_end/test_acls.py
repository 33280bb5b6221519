"""Kafka's own ``kafka-acls`` (AclCommand from the 4.3.1 jars) against a kbroker with the
StandardAuthorizer: add, list, remove, the --producer / --consumer shortcuts and prefixed
patterns, and the ACLs then deciding what a client may do.

The broker runs with ``super.users=User:ANONYMOUS`` for the tool (a PLAINTEXT client is
ANONYMOUS), so the tool may manage ACLs; the decisions are checked on the authorizer's rules
with a second principal in tests/kbroker/security/test_authorizer.py and against Kafka in
test_acls_deny_matrix.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.clients.java_cli import JavaCliClient
from compat.harness import wait_until
from tests.broker_process import BrokerProcess

ACLS = "org.apache.kafka.tools.AclCommand"
SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(str(tmp_path_factory.mktemp("acls") / "data"), SETTINGS)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def cli(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaCliClient]:
    client = JavaCliClient(broker.bootstrap, Path(tmp_path_factory.mktemp("acls-cli")))
    try:
        yield client
    finally:
        client.close()


def acls(cli: JavaCliClient, *args: str) -> list[str]:
    out = cli.run(ACLS, *args)
    assert out["exit"] == 0, out
    return [line.strip() for line in out["stdout"] if line.strip()]


def listed(cli: JavaCliClient, *args: str) -> set[str]:
    """The ACL lines ``--list`` prints (their resource headers left out)."""
    return {line for line in acls(cli, "--list", *args) if line.startswith("(principal=")}


def eventually_listed(cli: JavaCliClient, wanted: set[str], *args: str) -> set[str]:
    """What ``--list`` prints once it shows exactly ``wanted`` (an ACL is in the broker's
    metadata image a moment after the controller committed it), or after 15 s."""
    _ok, got = wait_until(lambda: listed(cli, *args), lambda got: got == wanted, 15.0)
    return got


def entry(principal: str, operation: str, permission: str = "ALLOW") -> str:
    return f"(principal={principal}, host=*, operation={operation}, permissionType={permission})"


def test_add_list_and_remove_a_topic_acl(cli: JavaCliClient) -> None:
    added = acls(cli, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:" in added
    assert eventually_listed(cli, {entry("User:alice", "READ")}, "--topic", "orders") == {entry("User:alice", "READ")}
    acls(cli, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert eventually_listed(cli, set(), "--topic", "orders") == set()


def test_producer_and_consumer_shortcuts(cli: JavaCliClient) -> None:
    acls(cli, "--add", "--allow-principal", "User:bob", "--producer", "--topic", "payments")
    acls(cli, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", "payments", "--group", "billing")
    topic = {entry("User:bob", "WRITE"), entry("User:bob", "DESCRIBE"), entry("User:bob", "CREATE"),
             entry("User:carol", "READ"), entry("User:carol", "DESCRIBE")}
    assert eventually_listed(cli, topic, "--topic", "payments") == topic
    assert listed(cli, "--group", "billing") == {entry("User:carol", "READ")}
    acls(cli, "--remove", "--force", "--topic", "payments")
    acls(cli, "--remove", "--force", "--group", "billing")
    assert eventually_listed(cli, set(), "--topic", "payments") == set()


def test_prefixed_patterns_and_match_listing(cli: JavaCliClient) -> None:
    acls(cli, "--add", "--deny-principal", "User:dave", "--operation", "Write", "--topic", "audit-",
         "--resource-pattern-type", "prefixed")
    acls(cli, "--add", "--allow-principal", "User:dave", "--operation", "Write", "--topic", "audit-2026")
    prefixed = {entry("User:dave", "WRITE", "DENY")}
    assert eventually_listed(cli, prefixed, "--topic", "audit-", "--resource-pattern-type", "prefixed") == prefixed
    # MATCH lists every pattern that applies to the name: the literal and the prefixed one.
    both = {entry("User:dave", "WRITE", "DENY"), entry("User:dave", "WRITE")}
    assert listed(cli, "--topic", "audit-2026", "--resource-pattern-type", "match") == both
    acls(cli, "--remove", "--force", "--topic", "audit-", "--resource-pattern-type", "prefixed")
    assert eventually_listed(cli, {entry("User:dave", "WRITE")}, "--topic", "audit-2026",
                             "--resource-pattern-type", "match") == {entry("User:dave", "WRITE")}


def test_cluster_and_transactional_id_acls(cli: JavaCliClient) -> None:
    acls(cli, "--add", "--allow-principal", "User:erin", "--operation", "IdempotentWrite", "--cluster")
    acls(cli, "--add", "--allow-principal", "User:erin", "--producer", "--topic", "ledger", "--transactional-id",
         "ledger-tx")
    assert eventually_listed(cli, {entry("User:erin", "IDEMPOTENT_WRITE")}, "--cluster") == {
        entry("User:erin", "IDEMPOTENT_WRITE")}
    assert listed(cli, "--transactional-id", "ledger-tx") == {entry("User:erin", "WRITE"),
                                                             entry("User:erin", "DESCRIBE")}


def test_internal_topics_refuse_client_writes_even_from_a_super_user(broker: BrokerProcess) -> None:
    """As Kafka's ReplicaManager: only its coordinators append to __consumer_offsets (a client
    only under the admin client id), whatever the ACLs say."""
    from confluent_kafka import Consumer, Producer

    # A consumer with a group looks for its coordinator, which makes __consumer_offsets.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "makes-offsets-topic"})
    ok, _listed = wait_until(
        lambda: "__consumer_offsets" in consumer.list_topics(timeout=10).topics, bool, 15.0)
    consumer.close()
    assert ok
    outcomes: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("__consumer_offsets", b"forged", on_delivery=lambda err, _m: outcomes.append(err.name()))
    producer.flush(15)
    assert outcomes == ["TOPIC_EXCEPTION"]  # librdkafka's name for INVALID_TOPIC_EXCEPTION


def _create_acl_request() -> object:
    import sys

    from kbroker.protocol.codec import request_schema

    schema = request_schema(30, 3)
    creation = sys.modules[schema.__module__].AclCreation(
        resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:mallory", host="*",
        operation=3, permission_type=3)
    return schema(creations=(creation,))


@pytest.mark.parametrize("kind", ["kafka", "kbroker"])
def test_the_controller_listener_authorizes_acl_changes_as_kafka(kind: str, tmp_path: Path) -> None:
    """CreateAcls sent straight to a combined node's controller listener by a principal without
    ALTER on the cluster is CLUSTER_AUTHORIZATION_FAILED, on Kafka 4.3.1 and on kbroker. The
    cluster gets one ACL first, CLUSTER_ACTION for ANONYMOUS (the node's own broker talks to its
    controller as ANONYMOUS), so the no-ACL default no longer applies to it."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from compat.targets import KafkaTarget, KbrokerTarget
    from tests.kbroker.handlers.wire import call

    settings = {**SETTINGS, "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}
    target = (KafkaTarget if kind == "kafka" else KbrokerTarget)(tmp_path, extra=settings)
    with target:
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        brokers_own = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS",
                                 "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
        for future in admin.create_acls([brokers_own]).values():
            future.result(timeout=30)  # answered once committed: the controller decides with it
        properties = dict(line.split("=", 1) for line in target.properties.read_text().splitlines() if "=" in line)
        controller = properties["controller.quorum.voters"].split("@", 1)[1]
        answer = call(controller, _create_acl_request(), 3)
        assert [r.error_code for r in answer.results] == [31]  # CLUSTER_AUTHORIZATION_FAILED
