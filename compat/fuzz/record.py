"""Recording requests from real clients: a proxy in front of kbroker while each client stack works.

``python -m compat.fuzz record`` starts kbroker advertising the proxy's address (so clients
reach every broker through it after bootstrap), sets up the world's topics (``world.py``), and
runs a handful of scenarios with each client stack the compat suite drives — kafka-python,
aiokafka, confluent-kafka, kcat, the Java client and Kafka's CLI tools — through their adapters
in ``compat/clients``: admin (topics, partitions, configs, records deletion, cluster and log
dirs), produce in every compression codec and with acks 0/1/all, consume by offset and by
timestamp, list offsets, a consumer group of each protocol the client speaks (join, sync,
heartbeat, commit, leave, then the group admin calls), and transactions (commit, abort, offsets
sent to a transaction, an administrative abort). A few APIs only some clients expose are called
through that client directly (kafka-python's admin, Kafka's CLI tools by their main classes),
among them the APIs of features kbroker answers switched off, as Kafka does without an
authorizer or SASL listener: ACLs (kafka-acls, librdkafka and kafka-python admins), client
quotas and SCRAM credentials (kafka-configs --entity-type clients/users, the admins),
delegation tokens (kafka-delegation-tokens), a SASL handshake (a librdkafka producer set to
SASL_PLAINTEXT), share groups (kafka-share-groups, kafka-console-share-consumer), streams groups
(kafka-streams-groups), raft voters (kafka-metadata-quorum add-controller / remove-controller),
and the config resources (kafka-client-metrics --list, kafka-configs --entity-type
groups/broker-loggers). The broker has two ``log.dirs``, so kafka-reassign-partitions with
``log_dirs`` (and kafka-python's ``alter_replica_log_dirs``) move a replica between them.

No client here sends the rest: SaslAuthenticate (every client stops at the handshake's
ILLEGAL_SASL_STATE), ShareFetch / ShareAcknowledge (the share consumer stops at the heartbeat's
UNSUPPORTED_VERSION while share groups are off), DescribeShareGroupOffsets /
AlterShareGroupOffsets (kafka-share-groups stops at the group description's answer),
StreamsGroupHeartbeat (needs Kafka Streams, whose jar is not installed), and the inter-broker
share-group state APIs (Initialize/Read/Write/Delete/ReadSummary). For every served API key no
client sent, ``record`` adds frames made by ``generate.py``'s ``RequestGenerator`` (one per
served version), marked ``generated`` in
``recorded.jsonl``, so the recorded corpus still covers every API.

The proxy keeps every complete request frame with the client that sent it, and reads topic ids
from Metadata and CreateTopics answers. Kept: at most ``MAX_PER_KIND`` distinct frames per
(client, API key, version) — distinct ignoring the correlation id — and none over
``MAX_FRAME_BYTES``; ``corpus.save_recorded`` writes them to ``recorded.jsonl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbroker.protocol.codec import decode_response

from compat.clients import CLIENTS
from compat.clients.base import Client, Rec, Unsupported
from compat.clients.confluent import ConfluentClient
from compat.clients.java_cli import JavaCliClient
from compat.clients.kafka_python import KafkaPythonClient
from compat.fuzz import control, world
from compat.fuzz.corpus import BaseFrame, Recorded, base_frame, served_versions
from compat.fuzz.generate import RequestGenerator
from compat.targets import HOST, KbrokerTarget, free_port

MAX_PER_KIND = 6
MAX_FRAME_BYTES = 16_384
METADATA, CREATE_TOPICS = 3, 19
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"
LEADER_ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
ACLS_TOOL = "org.apache.kafka.tools.AclCommand"
CONFIGS_TOOL = "kafka.admin.ConfigCommand"
TOKENS_TOOL = "org.apache.kafka.tools.DelegationTokenCommand"
CLIENT_METRICS_TOOL = "org.apache.kafka.tools.ClientMetricsCommand"
SHARE_GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
SHARE_CONSUMER_TOOL = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
STREAMS_GROUPS_TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"
RECORDER = "recorder"  # the source of the frames ``record`` generates for APIs no client sent
SECOND_LOG_DIR = "data-2"  # the broker's second log dir, under its work dir
ACL_PRINCIPAL = "User:fz-alice"
SCRAM_USER = "fz-alice"


class RecordingProxy:
    """Forwards each client connection to the broker and keeps the request frames it carries."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.label = "?"  # the client stack running now; a connection keeps the label it opened with
        self.frames: list[tuple[str, bytes]] = []
        self.topic_ids: dict[str, uuid.UUID] = {}

    async def _pump_requests(self, label: str, client: asyncio.StreamReader, broker: asyncio.StreamWriter,
                             pending: deque[tuple[int, int, int]]) -> None:
        while True:
            frame = await control.read_frame(client)
            if len(frame) >= 8:
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                pending.append((correlation_id, api_key, api_version))
                self.frames.append((label, frame))
            broker.write(struct.pack(">i", len(frame)) + frame)

    async def _pump_responses(self, broker: asyncio.StreamReader, client: asyncio.StreamWriter,
                              pending: deque[tuple[int, int, int]]) -> None:
        while True:
            frame = await control.read_frame(broker)
            client.write(struct.pack(">i", len(frame)) + frame)
            (correlation_id,) = struct.unpack_from(">i", frame, 0)
            while pending:  # requests without an answer (acks=0) are passed over
                sent_id, api_key, api_version = pending.popleft()
                if sent_id == correlation_id:
                    self._learn_topic_ids(api_key, api_version, frame)
                    break

    def _learn_topic_ids(self, api_key: int, api_version: int, frame: bytes) -> None:
        if api_key not in (METADATA, CREATE_TOPICS):
            return
        _correlation_id, response = decode_response(api_key, api_version, frame)
        for topic in response.topics:
            topic_id = getattr(topic, "topic_id", None)
            if topic.name and topic_id is not None and topic_id.int != 0:
                self.topic_ids[topic.name] = topic_id

    async def _connection(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        label = self.label
        broker_reader, broker_writer = await asyncio.open_connection(HOST, self.upstream_port)
        pending: deque[tuple[int, int, int]] = deque()
        pumps = [
            asyncio.ensure_future(self._pump_requests(label, client_reader, broker_writer, pending)),
            asyncio.ensure_future(self._pump_responses(broker_reader, client_writer, pending)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        broker_writer.close()
        client_writer.close()

    async def start(self, port: int) -> asyncio.Server:
        return await asyncio.start_server(self._connection, HOST, port)


def keep(frames: list[tuple[str, bytes]]) -> list[BaseFrame]:
    """The frames the corpus keeps: distinct (ignoring correlation ids), capped per kind."""
    seen: set[bytes] = set()
    per_kind: dict[tuple[str, int, int], int] = {}
    kept = []
    for label, frame in frames:
        if len(frame) > MAX_FRAME_BYTES:
            continue
        identity = label.encode() + b"\0" + frame[:4] + frame[8:]
        api_key, api_version = struct.unpack_from(">hh", frame, 0)
        kind = (label, api_key, api_version)
        if identity in seen or per_kind.get(kind, 0) >= MAX_PER_KIND:
            continue
        seen.add(identity)
        per_kind[kind] = per_kind.get(kind, 0) + 1
        kept.append(base_frame(frame, label))
    return kept


# --- what each client does ---------------------------------------------------------------------


def records(n: int, tag: str) -> list[Rec]:
    now = int(time.time() * 1000)
    return [Rec(value=f"{tag}-value-{i}".encode(), key=f"{tag}-key-{i}".encode(), partition=i % 3,
                headers=(("h", b"1"),), timestamp=now + i) for i in range(n)]  # fmt: skip


def scenario_steps(client: Client) -> list[tuple[str, Callable[[], Any]]]:
    """The steps every client runs (a step the client cannot express raises Unsupported)."""
    name = client.name
    new_topic = f"{world.NEW_TOPIC_PREFIX}{name}"
    group = f"{world.GROUP_PREFIX}{name}"
    data, admin = world.DATA.name, world.ADMIN.name
    multi = "consume.multi" in client.FEATURES
    partitions = [0, 1, 2] if multi else [0]
    now = int(time.time() * 1000)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("api versions", client.api_versions),
        ("describe cluster", client.describe_cluster),
        ("list topics", client.list_topics),
        ("describe topic", lambda: client.describe_topic(data)),
        ("create topic", lambda: client.create_topic(new_topic, partitions=2, configs={"retention.ms": "3600000"})),
        ("validate-only create", lambda: client.create_topic(f"{new_topic}-v", validate_only=True)),
        ("create partitions", lambda: client.create_partitions(new_topic, 3)),
        ("describe topic configs", lambda: client.describe_configs("topic", admin)),
        ("describe broker configs", lambda: client.describe_configs("broker", "1", synonyms=True)),
        ("alter configs", lambda: client.alter_configs(admin, [("retention.ms", "set", "86400000")])),
        ("alter configs (legacy)", lambda: alter_configs_legacy(client)),
        ("delete records", lambda: client.delete_records(admin, 0, 1)),
    ]
    recs = records(6, name) if "produce.partition" in client.FEATURES else [Rec(value=b"v", key=b"k")]
    for codec in CODECS:
        steps.append((f"produce {codec}", lambda codec=codec: client.produce(data, recs, codec=codec)))
    steps += [
        ("produce acks=1", lambda: client.produce(data, recs, acks="1")),
        ("produce acks=0", lambda: client.produce(data, recs, acks="0")),
        ("produce keyed to compacted", lambda: client.produce(world.COMPACT.name, [Rec(value=b"v", key=b"k")])),
        ("consume", lambda: client.consume(data, partitions, "earliest", max_records=12, timeout_s=5)),
        ("consume by timestamp", lambda: client.consume(data, partitions, {"timestamp": now}, max_records=1,
                                                        timeout_s=5)),
        ("list offsets earliest", lambda: client.list_offsets(data, 0, "earliest")),
        ("list offsets latest", lambda: client.list_offsets(data, 0, "latest")),
        ("list offsets max timestamp", lambda: client.list_offsets(data, 0, "max_timestamp")),
        ("list offsets by time", lambda: client.list_offsets(data, 0, now)),
    ]
    for protocol in ("classic", "consumer"):
        steps.append((f"group {protocol}", lambda protocol=protocol: group_session(client, f"{group}-{protocol}",
                                                                                   protocol)))
    steps += [
        ("list groups", client.list_groups),
        ("describe group", lambda: client.describe_group(f"{group}-classic")),
        ("group offsets", lambda: client.group_offsets(f"{group}-classic", data, [0, 1, 2])),
        ("alter group offsets", lambda: client.alter_group_offsets(f"{group}-classic", data, {0: 1})),
        ("delete group offsets", lambda: client.delete_group_offsets(f"{group}-classic", data, [1])),
        ("delete group", lambda: client.delete_group(f"{group}-classic")),
        ("transactions", lambda: transaction_session(client)),
        ("delete topic", lambda: client.delete_topic(new_topic)),
    ]
    return steps


def alter_configs_legacy(client: Client) -> Any:
    if "admin.alter_configs_legacy" not in client.FEATURES:
        raise Unsupported("admin.alter_configs_legacy")
    return client.alter_configs_legacy(world.ADMIN.name, {"retention.ms": "86400000"})  # type: ignore[attr-defined]


def group_session(client: Client, group: str, protocol: str) -> None:
    if protocol == "consumer" and "group.consumer_protocol" not in client.FEATURES:
        raise Unsupported("group.consumer_protocol")
    member = client.group_member(world.DATA.name, group, protocol)
    try:
        for _ in range(6):
            member.poll(500)
        member.commit({0: (1, "fz")})
        member.committed([0, 1, 2])
    finally:
        member.close()


def transaction_session(client: Client) -> None:
    producer = client.transactional_producer(f"{world.TRANSACTIONAL_ID_PREFIX}{client.name}")
    try:
        for end in (producer.commit, producer.abort):
            producer.begin()
            producer.send(world.TXN.name, [Rec(value=b"in-txn", key=b"k")])
            end()
    finally:
        producer.close()


def kafka_python_extras(client: KafkaPythonClient, second_log_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    """Admin APIs only kafka-python's admin client exposes among the Python stacks."""
    from kafka import TopicPartition, TopicPartitionReplica

    admin = client.admin
    data, txn = world.DATA.name, world.TXN.name
    txn_id = f"{world.TRANSACTIONAL_ID_PREFIX}{client.name}"
    return [
        ("describe log dirs", admin.describe_log_dirs),
        ("describe producers", lambda: admin.describe_producers([TopicPartition(txn, 0)])),
        ("describe transactions", lambda: admin.describe_transactions([txn_id])),
        ("list transactions", admin.list_transactions),
        ("elect leaders", lambda: admin.elect_leaders(0, {data: [0]}, raise_errors=False)),
        ("list reassignments", admin.list_partition_reassignments),
        ("alter reassignments", lambda: admin.alter_partition_reassignments({TopicPartition(data, 0): [1]})),
        ("describe topic partitions", lambda: admin.describe_topic_partitions([data])),
        ("acls", lambda: kafka_python_acls(admin)),
        ("describe scram credentials", lambda: admin.describe_user_scram_credentials([SCRAM_USER])),
        ("alter scram credentials", lambda: kafka_python_scram(admin)),
        ("alter replica log dirs", lambda: admin.alter_replica_log_dirs(
            {TopicPartitionReplica(data, 1, 1): str(second_log_dir)})),
        ("list config resources", admin.list_config_resources),
    ]


def kafka_python_acls(admin: Any) -> None:
    """Describe, create and delete one ACL (SECURITY_DISABLED without an authorizer)."""
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    pattern = ResourcePattern(ResourceType.TOPIC, world.DATA.name, ACLResourcePatternType.LITERAL)
    acl = ACL(principal=ACL_PRINCIPAL, host="*", operation=ACLOperation.READ,
              permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)
    matching = ACLFilter(principal=ACL_PRINCIPAL, host=None, operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    for call in (lambda: admin.describe_acls(matching), lambda: admin.create_acls([acl]),
                 lambda: admin.delete_acls([matching])):
        with contextlib.suppress(Exception):  # each answer is an error; the next call still goes out
            call()


def kafka_python_scram(admin: Any) -> None:
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(SCRAM_USER, ScramMechanism.SCRAM_SHA_256, "fz-secret", iterations=8192),
        UserScramCredentialDeletion(SCRAM_USER, ScramMechanism.SCRAM_SHA_512),
    ])  # fmt: skip


def confluent_extras(client: ConfluentClient) -> list[tuple[str, Callable[[], Any]]]:
    """Offsets sent to a transaction (AddOffsetsToTxn, TxnOffsetCommit) and a position with a
    leader epoch (validated with OffsetForLeaderEpoch): librdkafka calls the adapter lacks."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    timeout = 15

    def consumer(group: str) -> Any:
        return Consumer({"bootstrap.servers": client.bootstrap, "group.id": group, "enable.auto.commit": False})

    def offsets_in_transaction() -> None:
        group = consumer(f"{world.GROUP_PREFIX}confluent-txn")
        producer = Producer({"bootstrap.servers": client.bootstrap,
                             "transactional.id": f"{world.TRANSACTIONAL_ID_PREFIX}confluent-offsets"})
        try:
            producer.init_transactions(timeout)
            producer.begin_transaction()
            producer.produce(world.TXN.name, b"with-offsets")
            offsets = [TopicPartition(world.DATA.name, 0, 1)]
            producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), timeout)
            producer.commit_transaction(timeout)
        finally:
            group.close()

    def position_with_epoch() -> None:
        reader = consumer(f"{world.GROUP_PREFIX}confluent-epoch")
        try:
            reader.assign([TopicPartition(world.DATA.name, 0, 1, leader_epoch=0)])
            for _ in range(4):
                reader.poll(0.5)
        finally:
            reader.close()

    def acls() -> None:
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        binding = AclBinding(ResourceType.TOPIC, world.DATA.name, ResourcePatternType.LITERAL, ACL_PRINCIPAL, "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        matching = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, ACL_PRINCIPAL, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
        futures = [client.admin.describe_acls(matching), *client.admin.create_acls([binding]).values(),
                   *client.admin.delete_acls([matching]).values()]
        for future in futures:
            with contextlib.suppress(Exception):  # SECURITY_DISABLED without an authorizer
                future.result(timeout)

    def scram() -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        futures = [*client.admin.describe_user_scram_credentials([SCRAM_USER]).values(),
                   *client.admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                       SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"fz-secret")]).values()]
        for future in futures:
            with contextlib.suppress(Exception):  # no credentials stored; altering them is refused
                future.result(timeout)

    def sasl_handshake() -> None:
        """A producer set to SASL_PLAINTEXT against the PLAINTEXT listener: it sends
        SaslHandshake after ApiVersions and stops at the answer."""
        producer = Producer({"bootstrap.servers": client.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": SCRAM_USER, "sasl.password": "fz-secret"})
        with contextlib.suppress(Exception):
            producer.list_topics(timeout=3)

    return [("offsets in a transaction", offsets_in_transaction), ("position with leader epoch", position_with_epoch),
            ("acls", acls), ("scram credentials", scram), ("sasl handshake", sasl_handshake)]


def java_cli_extras(client: JavaCliClient) -> list[tuple[str, Callable[[], Any]]]:
    """Kafka's own tools for the APIs the adapter's operations do not reach."""
    txn_id = f"{world.TRANSACTIONAL_ID_PREFIX}java"
    reassignment = client.workdir / "reassignment.json"
    reassignment.parent.mkdir(parents=True, exist_ok=True)
    reassignment.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": world.DATA.name, "partition": 0, "replicas": [1]}]}))  # fmt: skip
    return [
        ("kafka-transactions list", lambda: client.run(TRANSACTIONS_TOOL, "list")),
        ("kafka-transactions describe", lambda: client.run(
            TRANSACTIONS_TOOL, "describe", "--transactional-id", txn_id)),
        ("kafka-transactions describe-producers", lambda: client.run(
            TRANSACTIONS_TOOL, "describe-producers", "--topic", world.TXN.name, "--partition", "0")),
        ("kafka-transactions abort", lambda: client.run(
            TRANSACTIONS_TOOL, "abort", "--topic", world.TXN.name, "--partition", "0", "--producer-id", "0",
            "--producer-epoch", "0", "--coordinator-epoch", "0")),
        ("kafka-leader-election", lambda: client.run(
            LEADER_ELECTION_TOOL, "--election-type", "preferred", "--all-topic-partitions")),
        ("kafka-log-dirs", lambda: client.run(LOG_DIRS_TOOL, "--describe")),
        ("kafka-reassign-partitions list", lambda: client.run(REASSIGN_TOOL, "--list")),
        ("kafka-reassign-partitions execute", lambda: client.run(
            REASSIGN_TOOL, "--execute", "--reassignment-json-file", str(reassignment))),
        ("kafka-consumer-groups describe", lambda: client.consumer_groups(
            "--describe", "--group", f"{world.GROUP_PREFIX}java-consumer")),
        ("kafka-metadata-quorum describe", lambda: client.run(QUORUM_TOOL, "describe", "--status")),
        ("kafka-features describe", lambda: client.run(FEATURES_TOOL, "describe")),
        ("kafka-features downgrade --dry-run", lambda: client.run(
            FEATURES_TOOL, "downgrade", "--feature", "transaction.version=1", "--dry-run")),
        ("kafka-cluster unregister", lambda: client.run(CLUSTER_TOOL, "--id", "99", command=("unregister",))),
    ]


def java_cli_feature_extras(client: JavaCliClient, second_log_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    """Kafka's tools for the APIs of switched-off features, the config resources and JBOD moves."""
    data = world.DATA.name
    share_group, streams_group = f"{world.GROUP_PREFIX}share", f"{world.GROUP_PREFIX}streams"
    acl = ["--allow-principal", ACL_PRINCIPAL, "--operation", "Read", "--topic", data]
    move = client.workdir / "move-log-dir.json"
    move.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": data, "partition": 2, "replicas": [1], "log_dirs": [str(second_log_dir)]}]}))  # fmt: skip
    no_settings = client.workdir / "empty.properties"  # kafka-delegation-tokens wants a --command-config
    no_settings.write_text("")
    tokens = ("--command-config", str(no_settings))
    return [
        ("kafka-acls list", lambda: client.run(ACLS_TOOL, "--list")),
        ("kafka-acls add", lambda: client.run(ACLS_TOOL, "--add", *acl)),
        ("kafka-acls remove", lambda: client.run(ACLS_TOOL, "--remove", "--force", *acl)),
        ("kafka-configs describe clients", lambda: client.run(CONFIGS_TOOL, "--describe", "--entity-type", "clients")),
        ("kafka-configs alter clients", lambda: client.run(
            CONFIGS_TOOL, "--alter", "--entity-type", "clients", "--entity-name", "fz-client",
            "--add-config", "producer_byte_rate=1048576")),
        ("kafka-configs describe users", lambda: client.run(
            CONFIGS_TOOL, "--describe", "--entity-type", "users", "--entity-name", SCRAM_USER)),
        ("kafka-configs alter users (SCRAM)", lambda: client.run(
            CONFIGS_TOOL, "--alter", "--entity-type", "users", "--entity-name", SCRAM_USER,
            "--add-config", "SCRAM-SHA-256=[iterations=8192,password=fz-secret]")),
        ("kafka-configs describe groups", lambda: client.run(
            CONFIGS_TOOL, "--describe", "--entity-type", "groups", "--entity-name", share_group)),
        ("kafka-configs describe broker-loggers", lambda: client.run(
            CONFIGS_TOOL, "--describe", "--entity-type", "broker-loggers", "--entity-name", "1")),
        ("kafka-client-metrics list", lambda: client.run(CLIENT_METRICS_TOOL, "--list")),
        ("kafka-delegation-tokens create", lambda: client.run(
            TOKENS_TOOL, "--create", "--max-life-time-period", "-1", *tokens)),
        ("kafka-delegation-tokens renew", lambda: client.run(
            TOKENS_TOOL, "--renew", "--hmac", "Zno=", "--renew-time-period", "-1", *tokens)),
        ("kafka-delegation-tokens expire", lambda: client.run(
            TOKENS_TOOL, "--expire", "--hmac", "Zno=", "--expiry-time-period", "-1", *tokens)),
        ("kafka-delegation-tokens describe", lambda: client.run(TOKENS_TOOL, "--describe", *tokens)),
        ("kafka-reassign-partitions log_dirs", lambda: client.run(
            REASSIGN_TOOL, "--execute", "--reassignment-json-file", str(move))),
        ("kafka-share-groups list", lambda: client.run(SHARE_GROUPS_TOOL, "--list")),
        ("kafka-share-groups describe", lambda: client.run(SHARE_GROUPS_TOOL, "--describe", "--group", share_group)),
        ("kafka-share-groups describe offsets", lambda: client.run(
            SHARE_GROUPS_TOOL, "--describe", "--offsets", "--group", share_group)),
        ("kafka-share-groups reset-offsets", lambda: client.run(
            SHARE_GROUPS_TOOL, "--reset-offsets", "--group", share_group, "--topic", data, "--to-earliest",
            "--execute")),
        ("kafka-share-groups delete-offsets", lambda: client.run(
            SHARE_GROUPS_TOOL, "--delete-offsets", "--group", share_group, "--topic", data)),
        ("kafka-console-share-consumer", lambda: client.run(
            SHARE_CONSUMER_TOOL, "--topic", data, "--group", share_group, "--max-messages", "1",
            "--timeout-ms", "3000")),
        ("kafka-streams-groups list", lambda: client.run(STREAMS_GROUPS_TOOL, "--list")),
        ("kafka-streams-groups describe", lambda: client.run(
            STREAMS_GROUPS_TOOL, "--describe", "--group", streams_group)),
        ("kafka-metadata-quorum add-controller", lambda: add_controller(client)),
        ("kafka-metadata-quorum remove-controller", lambda: client.run(
            QUORUM_TOOL, "remove-controller", "--controller-id", "2", "--controller-directory-id",
            "AAAAAAAAAAAAAAAAAAAAAQ")),
    ]


def add_controller(client: JavaCliClient) -> Any:
    """``kafka-metadata-quorum add-controller``: the tool reads the new controller's node id,
    listener and directory id from its configuration and ``meta.properties``."""
    metadata_dir = client.workdir / "controller-2"
    metadata_dir.mkdir(exist_ok=True)
    (metadata_dir / "meta.properties").write_text(
        "version=1\ncluster.id=fz-cluster-id-0000000A\nnode.id=2\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAg\n")
    config = client.workdir / "controller-2.properties"
    config.write_text(f"process.roles=controller\nnode.id=2\ncontroller.listener.names=CONTROLLER\n"
                      f"listeners=CONTROLLER://{HOST}:9\nadvertised.listeners=CONTROLLER://{HOST}:9\n"
                      f"log.dirs={metadata_dir}\n")
    return client.run(QUORUM_TOOL, "--command-config", str(config), "add-controller")


def run_client(client: Client, second_log_dir: Path, extras_only: bool = False) -> list[str]:
    """Run every step for ``client`` (with ``extras_only``, only its client-specific ones); the
    failures (not Unsupported) as lines for the log."""
    steps = [] if extras_only else scenario_steps(client)
    if isinstance(client, KafkaPythonClient):
        steps += kafka_python_extras(client, second_log_dir)
    if isinstance(client, JavaCliClient):
        steps += java_cli_extras(client) + java_cli_feature_extras(client, second_log_dir)
    if isinstance(client, ConfluentClient):
        steps += confluent_extras(client)
    failures = []
    for label, step in steps:
        try:
            step()
        except Unsupported:
            continue
        except Exception as exc:  # a failing step is recorded traffic too; go on with the next
            failures.append(f"{client.name}: {label}: {exc!r}"[:300])
    return failures


def generated_frames(recorded: list[BaseFrame], topic_ids: dict[str, uuid.UUID]) -> list[BaseFrame]:
    """One ``RequestGenerator`` frame per served version of each API key no client sent."""
    sent = {f.api_key for f in recorded}
    generator = RequestGenerator(random.Random("record"), topic_ids)
    return [base_frame(generator.frame(key, version), RECORDER, generated=True)
            for key, versions in served_versions().items() if key not in sent for version in versions]


def record(workdir: Path, client_names: list[str] | None = None, kbroker_python: str = sys.executable,
           extras_only: bool = False) -> tuple[Recorded, list[str]]:
    """Record the clients' traffic against a fresh kbroker (run by ``kbroker_python``), plus
    generated frames for the APIs none of them sent; (the recording, the steps that failed).
    ``extras_only`` runs only the client-specific steps (to add APIs to an existing recording)."""
    proxy_port = free_port()
    second_log_dir = workdir / "kbroker" / SECOND_LOG_DIR
    log_dirs = f"{workdir / 'kbroker' / 'data'},{second_log_dir}"  # two, for AlterReplicaLogDirs
    settings = {"advertised.listeners": f"PLAINTEXT://{HOST}:{proxy_port}", "log.dirs": log_dirs}
    target = KbrokerTarget(workdir / "kbroker", python=kbroker_python, extra=settings)
    proxy = RecordingProxy(target.port)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="recording-proxy", daemon=True)
    thread.start()

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    failures: list[str] = []
    target.start()
    try:
        server = on_loop(proxy.start(proxy_port))
        proxy.label = "set-up"
        link = on_loop(control.BrokerLink.open(HOST, proxy_port))
        on_loop(control.set_up_world(link))
        link.close()
        for name, cls in CLIENTS.items():
            if client_names is not None and name not in client_names:
                continue
            proxy.label = name
            client = cls(f"{HOST}:{proxy_port}", workdir / name)
            try:
                failures += run_client(client, second_log_dir, extras_only)
            finally:
                with contextlib.suppress(Exception):
                    client.close()
        server.close()
    finally:
        target.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    sent = keep([(label, frame) for label, frame in proxy.frames if label != "set-up"])
    return Recorded(dict(proxy.topic_ids), sent + generated_frames(sent, proxy.topic_ids)), failures


def add_to(old: Recorded, new: Recorded) -> Recorded:
    """``old`` topped up from ``new``: client-sent frames of (key, version) pairs ``old`` lacks
    (an old generated frame gives way when a client now sends its API), and generated frames
    only for API keys with no frame at all."""
    sent_now = {f.api_key for f in new.frames if not f.generated}
    kept = [f for f in old.frames if not (f.generated and f.api_key in sent_now)]
    have_pairs = {(f.api_key, f.api_version) for f in kept}
    have_keys = {f.api_key for f in kept}
    added = [f for f in new.frames if (f.api_key, f.api_version) not in have_pairs and not f.generated]
    added += [f for f in new.frames if f.generated and f.api_key not in have_keys]
    return Recorded({**new.topic_ids, **old.topic_ids}, kept + added)
