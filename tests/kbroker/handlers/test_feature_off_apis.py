"""The APIs of features kbroker has off answer as Kafka 4.3.1 does with them off, over a socket
(the same answers are compared with a real Kafka in compat/scenarios/feature_off.py). The ACL
APIs with an authorizer on are tested in tests/end_to_end/test_acls.py."""

from __future__ import annotations

import datetime
import socket
import sys
import uuid

from kbroker.protocol.codec import request_schema
from kbroker.protocol.errors import ErrorCode

from .wire import _read, call, request_frame

NO_AUTHORIZER = "No Authorizer is configured."
TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3


def request(api_key: int, version: int, **fields: object) -> object:
    cls = request_schema(api_key, version)
    assert cls is not None
    return cls(**fields)


def nested(api_key: int, version: int, entity: str, **fields: object) -> object:
    return getattr(sys.modules[request_schema(api_key, version).__module__], entity)(**fields)


def acl_filter(api_key: int, version: int, name: str | None = None) -> object:
    prefix = "" if api_key == 30 else "_filter"
    fields = {f"resource_type{prefix}": TOPIC, f"resource_name{prefix}": "t", f"pattern_type{prefix}": LITERAL,
              f"principal{prefix}": "User:alice", f"host{prefix}": "*", "operation": READ, "permission_type": ALLOW}
    if api_key == 30:
        fields["resource_pattern_type"] = fields.pop("pattern_type")
    return nested(api_key, version, name, **fields) if name else request(api_key, version, **fields)


def test_acl_apis_answer_security_disabled(broker):
    for version in (1, 2, 3):
        described = call(broker.bootstrap, acl_filter(29, version), version)
        assert (described.error_code, described.error_message, described.resources) == (
            ErrorCode.security_disabled, "No Authorizer is configured on the broker", ())
        created = call(broker.bootstrap, request(30, version, creations=(acl_filter(30, version, "AclCreation"),)),
                       version)
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (ErrorCode.security_disabled, NO_AUTHORIZER)]
        deleted = call(broker.bootstrap, request(31, version, filters=(acl_filter(31, version, "DeleteAclsFilter"),)),
                       version)
        assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted.filter_results] == [
            (ErrorCode.security_disabled, NO_AUTHORIZER, ())]


# Kafka 4.3.1's answers on a PLAINTEXT listener, recorded (after the correlation id): the response
# header's empty tag section, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64), owner and requester
# User:ANONYMOUS, three -1 timestamps, an empty token id and hmac, no throttle, no tags.
KAFKA_CREATE_TOKEN_V3 = bytes.fromhex(
    "00" "0040" "05557365720a414e4f4e594d4f5553" "05557365720a414e4f4e594d4f5553"
    + "ff" * 24 + "01" "01" "00000000" "00")
KAFKA_RENEW_TOKEN_V2 = bytes.fromhex("00" "0040" "ffffffffffffffff" "00000000" "00")


def raw_answer(bootstrap: str, body: object, version: int) -> bytes:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_frame(body, version, correlation_id=1))
        size = int.from_bytes(_read(sock, 4), "big")
        return _read(sock, size)[4:]


def test_delegation_token_apis_are_not_allowed_on_plaintext(broker):
    created = raw_answer(broker.bootstrap, request(38, 3, owner_principal_type=None, owner_principal_name=None,
                                                   renewers=(), max_lifetime=datetime.timedelta(milliseconds=-1)), 3)
    assert created == KAFKA_CREATE_TOKEN_V3
    renewed = raw_answer(broker.bootstrap, request(39, 2, hmac=b"x", renew_period=datetime.timedelta(0)), 2)
    assert renewed == KAFKA_RENEW_TOKEN_V2
    described = call(broker.bootstrap, request(41, 3, owners=None), 3)
    assert (described.error_code, described.tokens) == (ErrorCode.delegation_token_request_not_allowed, ())


def test_sasl_handshake_on_plaintext_is_illegal_state_and_the_connection_stays_open(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_frame(request(17, 1, mechanism="PLAIN"), 1, correlation_id=1))
        size = int.from_bytes(_read(sock, 4), "big")
        assert _read(sock, size)[4:6] == ErrorCode.illegal_sasl_state.to_bytes(2, "big")
        sock.sendall(request_frame(request(36, 2, auth_bytes=b""), 2, correlation_id=2))
        size = int.from_bytes(_read(sock, 4), "big")
        assert int.from_bytes(_read(sock, size)[5:7], "big") == ErrorCode.illegal_sasl_state


def test_scram_and_quota_reads_see_nothing_stored(broker):
    described = call(broker.bootstrap, request(50, 0, users=(
        nested(50, 0, "UserName", name="bob"), nested(50, 0, "UserName", name="bob"),
        nested(50, 0, "UserName", name="carol"))), 0)
    assert [(r.user, r.error_code) for r in described.results] == [
        ("bob", ErrorCode.duplicate_resource), ("carol", ErrorCode.resource_not_found)]
    quotas = call(broker.bootstrap, request(48, 1, components=(), strict=False), 1)
    assert (quotas.error_code, quotas.entries) == (ErrorCode.none, ())


def test_share_and_streams_group_apis_answer_unsupported_version(broker):
    heartbeat = call(broker.bootstrap, request(76, 1, group_id="g", member_id="m", member_epoch=0, rack_id=None,
                                               subscribed_topic_names=("t",)), 1)
    assert heartbeat.error_code == ErrorCode.unsupported_version
    described = call(broker.bootstrap, request(89, 0, group_ids=("g",), include_authorized_operations=False), 0)
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g", ErrorCode.unsupported_version)]
    topic = nested(84, 0, "ReadStateData", topic_id=uuid.uuid4(),
                   partitions=(nested(84, 0, "PartitionData", partition=0, leader_epoch=0),))
    state = call(broker.bootstrap, request(84, 0, group_id="g", topics=(topic,)), 0)
    assert [p.error_code for r in state.results for p in r.partitions] == [ErrorCode.not_coordinator]


def test_raft_voter_changes_are_refused_with_static_voters(broker):
    listener = nested(80, 1, "Listener", name="CONTROLLER", host="127.0.0.1", port=9)
    added = call(broker.bootstrap, request(80, 1, cluster_id=None, timeout=datetime.timedelta(seconds=5), voter_id=2,
                                           voter_directory_id=uuid.uuid4(), listeners=(listener,),
                                           ack_when_committed=True), 1)
    assert (added.error_code, added.error_message) == (
        ErrorCode.unsupported_version, "Cluster doesn't support adding voter because the kraft.version feature is 0")
    removed = call(broker.bootstrap, request(81, 0, cluster_id="other", voter_id=1,
                                             voter_directory_id=uuid.uuid4()), 0)
    assert removed.error_code == ErrorCode.inconsistent_cluster_id
