"""APIs of features that are off: what Kafka 4.3.1 advertises and answers without an authorizer,
SASL, delegation tokens, share groups or streams groups (issue 17 items 6 and 11).

Each scenario calls the client's own admin API or Kafka's own tool where the client has one
(confluent-kafka's and kafka-python's admin clients, ``kafka-acls``, ``kafka-configs``,
``kafka-features``, ``kafka-leader-election``), and otherwise sends the request itself, built
with kio, on a socket to the target (``raw``): SASL on a PLAINTEXT listener, the delegation
token, share-group, streams-group, share-state and raft-voter APIs, which these clients do not
send here. Kafka 4.3.1 finalizes share.version and streams.version 1 at format time; kbroker
supports them at 0 only, so the scenarios that need them off turn them off first on both
targets (``kafka-features disable``, as a user of a cluster without share groups would).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import socket
import struct
import sys
import uuid
from typing import Any

from kbroker.protocol.codec import encode_request, request_schema, response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from compat.harness import wait_until
from compat.scenarios import Run, scenario

ANSWER_TIMEOUT_S = 10.0
FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"
ACLS_TOOL = "org.apache.kafka.tools.AclCommand"
CONFIGS_TOOL = "kafka.admin.ConfigCommand"
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
GROUP_FEATURES = ("share.version", "streams.version")
ADMIN_CLIENTS = ("confluent", "kafka-python", "java", "java-cli")


def entity(api_key: int, version: int, nested: str | None = None, **fields: Any) -> Any:
    """A kio request entity (or one of its nested entities) of ``api_key`` v``version``."""
    schema = request_schema(api_key, version)
    assert schema is not None, f"kio has no request {api_key} v{version}"
    cls = getattr(sys.modules[schema.__module__], nested) if nested else schema
    return cls(**fields)


def raw(run: Run, api_key: int, version: int, body: Any) -> Any:
    """Send one request on a new connection to the target and return the answer: decoded to
    plain values, its bytes in hex where kio cannot read them (the -1 timestamps of a refused
    delegation token), or "closed" when the broker closed the connection."""
    host, port = run.target.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(encode_request(api_key, version, 1, "compat", body))
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return "closed"
        frame = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    schema = response_schema(api_key, version)
    offset = 4 + (1 if schema.__flexible__ else 0)  # correlation id, response header tags
    try:
        answer, _size = entity_reader(schema)(memoryview(frame), offset)
    except SerialError:
        return {"hex": frame[offset:].hex()}
    return plain(answer)


def plain(value: Any) -> Any:
    """A kio entity as JSON-able values (error codes by name)."""
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if hasattr(value, "name") and isinstance(value, int):  # an ErrorCode
        return value.name
    if isinstance(value, (uuid.UUID, datetime.timedelta, datetime.datetime, bytes)):
        return str(value)
    return value


def finalized(run: Run) -> dict[str, int]:
    """The finalized feature levels the target's ApiVersions v4 answers."""
    body = entity(18, 4, client_software_name="compat", client_software_version="1")
    host, port = run.target.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(encode_request(18, 4, 1, "compat", body))
        frame = sock.recv(struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0], socket.MSG_WAITALL)
    answer, _size = entity_reader(response_schema(18, 4))(memoryview(frame), 4)
    return {f.name: f.max_version_level for f in answer.finalized_features}


def group_features_off(run: Run) -> None:
    """Disable share.version and streams.version (a no-op where they are 0 already) and wait
    until the target's broker has applied it."""
    updates = tuple(entity(57, 1, "FeatureUpdateKey", feature=name, max_version_level=0, upgrade_type=2)
                    for name in GROUP_FEATURES)
    raw(run, 57, 1, entity(57, 1, timeout=datetime.timedelta(seconds=30), feature_updates=updates,
                           validate_only=False))
    ok, levels = wait_until(lambda: finalized(run), lambda got: not set(GROUP_FEATURES) & set(got), 15.0)
    assert ok, f"share/streams groups still on: {levels}"


@scenario("feature-off/api-versions-table", needs={"api_versions"})
def api_versions_table(run: Run) -> Any:
    """Every API and version range the broker advertises, as the client saw them: the whole
    table, not only the APIs kbroker implements (the protocol/api-versions rule), since kbroker
    now advertises every API a Kafka 4.3.1 broker listener does."""
    return {"advertised": run.client.api_versions()}


ACL_SPEC = {"topic": "acl-topic", "principal": "User:alice", "host": "*"}


def _confluent_acls(admin: Any) -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from compat.clients.confluent import exc_name

    def outcome(future: Any) -> Any:
        try:
            return {"result": str(future.result(timeout=30))}
        except Exception as exc:
            return {"error": exc_name(exc)}

    binding = AclBinding(ResourceType.TOPIC, ACL_SPEC["topic"], ResourcePatternType.LITERAL, ACL_SPEC["principal"],
                         ACL_SPEC["host"], AclOperation.READ, AclPermissionType.ALLOW)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    return {"describe": outcome(admin.describe_acls(every)),
            "create": [outcome(f) for f in admin.create_acls([binding]).values()],
            "delete": [outcome(f) for f in admin.delete_acls([every]).values()]}


def _kafka_python_acls(admin: Any) -> Any:
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

    def named(error: Any) -> str:  # kafka-python reports an error as a class or an instance
        return error.__name__ if isinstance(error, type) else type(error).__name__

    def outcome(call: Any) -> Any:
        try:
            return call()
        except Exception as exc:
            return {"error": named(exc)}

    every = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                      resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    binding = ACL(principal=ACL_SPEC["principal"], host=ACL_SPEC["host"], operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, ACL_SPEC["topic"],
                                                   ACLResourcePatternType.LITERAL))

    def describe() -> Any:
        acls, error = admin.describe_acls(every)
        return {"acls": [str(a) for a in acls], "error": named(error)}

    def create() -> Any:
        result = admin.create_acls([binding])
        return {"succeeded": len(result["succeeded"]), "failed": [named(e) for e in result["failed"]]}

    def delete() -> Any:
        return [[len(matched), named(error)] for _filter, matched, error in admin.delete_acls([every])]

    return {"describe": outcome(describe), "create": outcome(create), "delete": outcome(delete)}


def _cli_acls(run: Run) -> Any:
    add = ["--allow-principal", ACL_SPEC["principal"], "--operation", "Read", "--topic", ACL_SPEC["topic"]]
    return {"list": run.client.run(ACLS_TOOL, "--list"),
            "add": run.client.run(ACLS_TOOL, "--add", *add),
            "remove": run.client.run(ACLS_TOOL, "--remove", "--force", *add)}


def without_stack_frames(out: Any) -> Any:
    """A tool's outcome without the stack frames of a printed exception (their lines name the
    classes that happened to run, not what the user is told)."""
    return {**out, **{stream: [line for line in out[stream] if not line.startswith("\tat ")]
                      for stream in ("stdout", "stderr")}}


@scenario("feature-off/acls", needs={"admin.describe_cluster"}, clients=ADMIN_CLIENTS)
def acls(run: Run) -> Any:
    """List, add and remove an ACL without an authorizer: SECURITY_DISABLED for each, with
    Kafka's messages; the client reports it its own way (librdkafka's error, kafka-python's
    SecurityDisabledError, the Java Admin client's exception, kafka-acls' output)."""
    if run.client.name == "confluent":
        return _confluent_acls(run.client.admin)
    if run.client.name == "kafka-python":
        return _kafka_python_acls(run.client.admin)
    if run.client.name == "java":  # AdminOps.acls in the driver JVM (the adapter has no ACL method)
        return run.client._call("acls")
    return {step: without_stack_frames(out) for step, out in _cli_acls(run).items()}


@scenario("feature-off/scram-and-quotas-describe", needs={"admin.describe_cluster"}, clients=("confluent", "java-cli"))
def scram_and_quotas_describe(run: Run) -> Any:
    """SCRAM credentials and client quotas where none were set: every user (nothing), a named
    user (RESOURCE_NOT_FOUND), and ``kafka-configs --describe`` of users, clients and a user."""
    if run.client.name == "confluent":
        from compat.clients.confluent import exc_name

        admin = run.client.admin

        def described(users: list[str] | None) -> Any:
            try:
                if users is None:
                    got = admin.describe_user_scram_credentials(request_timeout=30).result()
                    return {user: str(d) for user, d in got.items()}
                futures = admin.describe_user_scram_credentials(users, request_timeout=30)
                out = {}
                for user, future in futures.items():
                    try:
                        out[user] = str(future.result())
                    except Exception as exc:
                        out[user] = {"error": exc_name(exc)}
                return out
            except Exception as exc:
                return {"error": exc_name(exc)}

        return {"all": described(None), "alice": described(["alice"])}
    cases = {"users": ("--entity-type", "users"), "clients": ("--entity-type", "clients"),
             "alice": ("--entity-type", "users", "--entity-name", "alice")}
    return {label: without_stack_frames(run.client.run(CONFIGS_TOOL, "--describe", *args))
            for label, args in cases.items()}


@scenario("feature-off/features-describe", needs={"admin.describe_cluster"}, clients=("java-cli",))
def features_describe(run: Run) -> Any:
    """``kafka-features describe`` after ``disable`` of share.version and streams.version (off on
    both): every feature Kafka 4.3.1 lists, with its finalized level, and the supported range
    where kbroker supports what Kafka does (kbroker supports kraft.version 0 only, with static
    voters, and share/streams 0 only; their ranges are left out, the lines are not)."""
    group_features_off(run)
    out = run.client.run(FEATURES_TOOL, "describe")
    features: dict[str, Any] = {}
    for line in out["stdout"]:
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        name = fields.pop("Feature", None)
        if name is None:
            continue
        fields.pop("Epoch", None)
        if name in ("kraft.version", *GROUP_FEATURES):
            fields.pop("SupportedMaxVersion", None)
        features[name] = fields
    return {"exit": out["exit"], "features": features, "stderr": out["stderr"]}


@scenario("feature-off/leader-election-all", needs={"admin.describe_cluster"}, clients=("confluent", "java-cli"))
def leader_election_all(run: Run) -> Any:
    """A preferred election over all partitions where every leader is already preferred:
    nothing to report (``kafka-leader-election --all-topic-partitions`` prints nothing)."""
    run.topic(partitions=2)
    if run.client.name == "confluent":
        from confluent_kafka import ElectionType

        from compat.clients.confluent import exc_name

        try:
            # (confluent-kafka 2.16's elect_leaders raises SystemError when given request_timeout)
            result = run.client.admin.elect_leaders(ElectionType.PREFERRED, None).result()
            return {"partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in result)}
        except Exception as exc:
            return {"error": exc_name(exc)}
    return run.client.run(ELECTION_TOOL, "--election-type", "preferred", "--all-topic-partitions")


def _sasl(run: Run) -> Any:
    """SaslHandshake, then SaslAuthenticate on the same connection (it stays open)."""
    host, port = run.target.bootstrap.rsplit(":", 1)
    answers = []
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as sock:
        for api_key, version, body in ((17, 1, entity(17, 1, mechanism="PLAIN")),
                                       (36, 2, entity(36, 2, auth_bytes=b"\x00alice\x00secret"))):
            sock.sendall(encode_request(api_key, version, 1, "compat", body))
            head = sock.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                answers.append("closed")
                break
            frame = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
            schema = response_schema(api_key, version)
            answers.append(plain(entity_reader(schema)(memoryview(frame), 4 + int(schema.__flexible__))[0]))
    return answers


@scenario("feature-off/raw-answers", clients=("confluent",))
def raw_answers(run: Run) -> Any:
    """The APIs no client here sends, each at its highest version (and the ACL ones at v1):
    SASL on a PLAINTEXT connection; delegation tokens (refused on PLAINTEXT); share-group,
    streams-group and share-state APIs with share.version and streams.version off; raft voter
    changes with static voters; SCRAM and quota reads with nothing stored."""
    group_features_off(run)
    topic_id = uuid.UUID(int=5)
    owner = entity(41, 3, "DescribeDelegationTokenOwner", principal_type="User", principal_name="alice")
    state_partition = {"state_epoch": 0, "start_offset": 0}
    calls: dict[str, tuple[int, int, Any]] = {
        "describe-acls-v1": (29, 1, entity(29, 1, resource_type_filter=2, resource_name_filter="t",
                                           pattern_type_filter=3, principal_filter=None, host_filter=None,
                                           operation=1, permission_type=1)),
        "create-token": (38, 3, entity(38, 3, owner_principal_type=None, owner_principal_name=None, renewers=(),
                                       max_lifetime=datetime.timedelta(hours=1))),
        "create-token-v1": (38, 1, entity(38, 1, renewers=(), max_lifetime=datetime.timedelta(hours=1))),
        "renew-token": (39, 2, entity(39, 2, hmac=b"x", renew_period=datetime.timedelta(hours=1))),
        "expire-token": (40, 2, entity(40, 2, hmac=b"x", expiry_time_period=datetime.timedelta(hours=1))),
        "describe-tokens": (41, 3, entity(41, 3, owners=(owner,))),
        "describe-quotas": (48, 1, entity(48, 1, components=(), strict=False)),
        "describe-scram": (50, 0, entity(50, 0, users=(entity(50, 0, "UserName", name="alice"),
                                                       entity(50, 0, "UserName", name="bob"),
                                                       entity(50, 0, "UserName", name="bob")))),
        "share-heartbeat": (76, 1, entity(76, 1, group_id="g", member_id="AAAAAAAAAAAAAAAAAAAAAA", member_epoch=0,
                                          rack_id=None, subscribed_topic_names=("t",))),
        "share-describe": (77, 1, entity(77, 1, group_ids=("g",), include_authorized_operations=True)),
        "share-fetch": (78, 2, entity(78, 2, group_id="g", member_id="AAAAAAAAAAAAAAAAAAAAAA", share_session_epoch=0,
                                      max_wait=datetime.timedelta(milliseconds=100), min_bytes=1, max_bytes=1024,
                                      max_records=10, batch_size=10, share_acquire_mode=0, is_renew_ack=False,
                                      topics=(), forgotten_topics_data=())),
        "share-acknowledge": (79, 2, entity(79, 2, group_id="g", member_id="AAAAAAAAAAAAAAAAAAAAAA",
                                            share_session_epoch=1, is_renew_ack=False, topics=())),
        "add-voter": (80, 1, entity(80, 1, cluster_id=None, timeout=datetime.timedelta(seconds=5), voter_id=2,
                                    voter_directory_id=uuid.UUID(int=7), ack_when_committed=True,
                                    listeners=(entity(80, 1, "Listener", name="CONTROLLER", host="127.0.0.1",
                                                      port=9093),))),
        "remove-voter-without-directory": (81, 0, entity(81, 0, cluster_id=None, voter_id=2,
                                                         voter_directory_id=uuid.UUID(int=0))),
        "initialize-state": (83, 0, entity(83, 0, group_id="g", topics=(entity(
            83, 0, "InitializeStateData", topic_id=topic_id,
            partitions=(entity(83, 0, "PartitionData", partition=0, **state_partition),)),))),
        "read-state-summary": (87, 1, entity(87, 1, group_id="g", topics=(entity(
            87, 1, "ReadStateSummaryData", topic_id=topic_id,
            partitions=(entity(87, 1, "PartitionData", partition=0, leader_epoch=0),)),))),
        "streams-heartbeat": (88, 0, entity(88, 0, group_id="g", member_id="m", member_epoch=0,
                                            endpoint_information_epoch=0, instance_id=None, rack_id=None,
                                            rebalance_timeout=datetime.timedelta(seconds=30), topology=None,
                                            active_tasks=None, standby_tasks=None, warmup_tasks=None,
                                            process_id=None, user_endpoint=None, client_tags=None,
                                            task_offsets=None, task_end_offsets=None, shutdown_application=False)),
        "streams-describe": (89, 0, entity(89, 0, group_ids=("g",), include_authorized_operations=False)),
        "describe-share-offsets": (90, 1, entity(90, 1, groups=(entity(
            90, 1, "DescribeShareGroupOffsetsRequestGroup", group_id="g", topics=None),))),
        "delete-share-offsets": (92, 0, entity(92, 0, group_id="g", topics=())),
    }
    answers: dict[str, Any] = {name: raw(run, *call) for name, call in calls.items()}
    answers["sasl"] = _sasl(run)
    return answers
