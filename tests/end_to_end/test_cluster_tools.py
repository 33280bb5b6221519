"""Kafka's cluster tools against a cluster of each implementation: the same invocations, the same outcomes.

``kafka-metadata-quorum`` (DescribeQuorum, through a broker, which forwards it, and through the
controller listener), ``kafka-features`` (ApiVersions' finalized features and UpdateFeatures:
upgrade, downgrade, --dry-run, disable, refusals) and ``kafka-cluster unregister``
(UnregisterBroker: an unknown id, a live broker, a stopped one) run from Kafka 4.3.1's jars
against a real Kafka cluster and a kbroker cluster of the same topology (compat/cluster.py:
controller 100, brokers 1-3), one cluster per implementation for this module. Each test asserts
what a user of the tool relies on: its exit status and the lines it prints, which are the same
on both except where kbroker supports less (kraft.version, share.version and streams.version
at 0 only — those lines are left out).
"""

from __future__ import annotations

import datetime
import re
import shutil
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kbroker.protocol.codec import response_schema
from kbroker.protocol.errors import ErrorCode
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.serial import entity_reader
from kio.static.primitive import i32, i32Timedelta

from compat.cluster import CONTROLLER_ID, Cluster, make_cluster
from compat.deps import kafka_classpath
from tests.end_to_end.raw_kafka import encode_request
from tests.end_to_end.test_java_cli import LOG4J2_CONFIG, KafkaCli, Result

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
CLUSTER = "org.apache.kafka.tools.ClusterTool"
API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
DEADLINE_S = 30.0
# The features both implementations support at the same levels (kbroker lists share.version and
# streams.version at 0 only, Kafka 4.3.1 at 0-1).
COMMON_FEATURES = ("eligible.leader.replicas.version", "group.version", "metadata.version", "transaction.version")

T = TypeVar("T")


@pytest.fixture(scope="module", params=["kafka", "kbroker"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(request.param, tmp_path_factory.mktemp(f"tools-{request.param}")) as running:
        yield running


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    java = shutil.which("java")
    assert java is not None, "the cluster tool tests need a Java 17+ runtime"
    log4j = tmp_path_factory.mktemp("tools-cli") / "log4j2.properties"
    log4j.write_text(LOG4J2_CONFIG)
    return KafkaCli(java, kafka_classpath(), log4j)


def broker(cluster: Cluster) -> str:
    return cluster.nodes[1].bootstrap


def controller(cluster: Cluster) -> str:
    return cluster.nodes[CONTROLLER_ID].bootstrap


def wait_for(what: str, condition: Callable[[], T | None], timeout: float = DEADLINE_S) -> T:
    """Poll until ``condition`` returns something true (each call runs a tool: no sleep needed)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"


def status_fields(text: str) -> dict[str, str]:
    return {key: value.strip() for key, value in (line.split(":", 1) for line in text.splitlines() if line)}


def features(cli: KafkaCli, *bootstrap: str) -> dict[str, tuple[str, str, str, str]]:
    """``kafka-features describe``: feature -> (supported min, supported max, finalized level, epoch)."""
    rows = {}
    for line in cli.run(FEATURES, *bootstrap, "describe").text.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        rows[fields["Feature"]] = (fields["SupportedMinVersion"], fields["SupportedMaxVersion"],
                                   fields["FinalizedVersionLevel"], fields["Epoch"])
    return rows


def feature_change(cli: KafkaCli, cluster: Cluster, *args: str) -> tuple[int, str]:
    result: Result = cli.run(FEATURES, "--bootstrap-server", broker(cluster), *args, check=False)
    return result.returncode, result.text


def raw_request(cluster: Cluster, api_key: int, request: Any) -> Any:
    """One v1 request to broker 1 over a socket of its own, and the decoded answer."""
    node = cluster.nodes[1]
    with socket.create_connection((node.host, node.port), timeout=DEADLINE_S) as sock:
        sock.sendall(encode_request(api_key, 1, request, 1))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
    answer, _size = entity_reader(response_schema(api_key, 1))(frame, 5)  # correlation id, header tags
    return answer


def test_metadata_quorum_is_described_through_a_broker_and_through_the_controller(cli: KafkaCli,
                                                                                  cluster: Cluster) -> None:
    for bootstrap in (("--bootstrap-server", broker(cluster)), ("--bootstrap-controller", controller(cluster))):
        status = wait_for("every broker observes the metadata log", lambda b=bootstrap: (
            (out := cli.run(QUORUM, *b, "describe", "--status").text)
            and all(f'"id": {n}' in out.split("CurrentObservers:")[1] for n in cluster.broker_ids) and out))
        fields = status_fields(status)
        assert set(fields) == {"ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                               "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"}
        assert fields["LeaderId"] == str(CONTROLLER_ID)
        assert int(fields["LeaderEpoch"]) >= 1 and int(fields["HighWatermark"]) > 0
        assert int(fields["MaxFollowerLag"]) == 0  # the only voter is the leader
        assert fields["CurrentVoters"] == f'[{{"id": {CONTROLLER_ID}, "endpoints": ["CONTROLLER://{controller(cluster)}"]}}]'

        header, *rows = cli.run(QUORUM, *bootstrap, "describe", "--replication").text.splitlines()
        assert header.split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                  "LastCaughtUpTimestamp", "Status"]
        table = {int(row.split()[0]): row.split() for row in rows}
        assert sorted(table) == sorted([CONTROLLER_ID, *cluster.broker_ids])
        assert table[CONTROLLER_ID][-1] == "Leader" and {table[b][-1] for b in cluster.broker_ids} == {"Observer"}
        for _node, _directory, end_offset, lag, fetched, caught_up, _status in table.values():
            assert int(end_offset) > 0 and int(lag) >= 0 and int(fetched) > 0 and int(caught_up) >= -1


def test_features_are_finalized_at_their_highest_supported_level(cli: KafkaCli, cluster: Cluster) -> None:
    for bootstrap in (("--bootstrap-server", broker(cluster)), ("--bootstrap-controller", controller(cluster))):
        described = features(cli, *bootstrap)
        assert {name: described[name][:3] for name in COMMON_FEATURES} == {
            "eligible.leader.replicas.version": ("0", "1", "1"),
            "group.version": ("0", "1", "1"),
            "metadata.version": ("3.3-IV3", "4.3-IV0", "4.3-IV0"),
            "transaction.version": ("0", "2", "2"),
        }
        assert described["kraft.version"][2] == "0"  # a static quorum
        epochs = {epoch for _low, _high, _level, epoch in described.values()}
        assert len(epochs) == 1 and int(epochs.pop()) > 0  # one epoch: the metadata offset
    api_lines = [line.strip() for line in cli.run(API_VERSIONS, "--bootstrap-server", broker(cluster)).text.splitlines()
                 if line.strip().startswith(("DescribeQuorum(55)", "UpdateFeatures(57)", "UnregisterBroker(64)"))]
    # one line per broker and API
    assert sorted(set(api_lines)) == ["DescribeQuorum(55): 0 to 2 [usable: 2],",
                                      "UnregisterBroker(64): 0 [usable: 0],", "UpdateFeatures(57): 0 to 2 [usable: 2],"]


def test_features_are_upgraded_and_downgraded_as_kafka_does(cli: KafkaCli, cluster: Cluster) -> None:
    def finalized(name: str) -> Callable[[], str]:
        return lambda: features(cli, "--bootstrap-server", broker(cluster))[name][2]

    assert feature_change(cli, cluster, "downgrade", "--feature", "transaction.version=1", "--dry-run") == (
        0, "transaction.version can be downgraded to 1.\n")
    assert finalized("transaction.version")() == "2"
    assert feature_change(cli, cluster, "downgrade", "--feature", "transaction.version=1") == (
        0, "transaction.version was downgraded to 1.\n")
    wait_for("the broker reports transaction.version 1", lambda: finalized("transaction.version")() == "1")
    assert feature_change(cli, cluster, "upgrade", "--feature", "transaction.version=2") == (
        0, "transaction.version was upgraded to 2.\n")
    wait_for("the broker reports transaction.version 2", lambda: finalized("transaction.version")() == "2")
    assert feature_change(cli, cluster, "disable", "--feature", "group.version") == (0, "group.version was disabled.\n")
    wait_for("the broker reports group.version 0", lambda: finalized("group.version")() == "0")
    # group.version 0 switches the KIP-848 protocol off: heartbeats and describes are UNSUPPORTED_VERSION
    heartbeat = ConsumerGroupHeartbeatRequest(
        group_id="tools-group", member_id=str(uuid.uuid4()), member_epoch=i32(0), instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), subscribed_topic_names=("t",),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=())
    answer = raw_request(cluster, 68, heartbeat)
    assert (answer.error_code, answer.error_message) == (ErrorCode.unsupported_version, None)
    described = raw_request(cluster, 69, ConsumerGroupDescribeRequest(group_ids=("tools-group",),
                                                                     include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("tools-group", ErrorCode.unsupported_version)]
    assert feature_change(cli, cluster, "upgrade", "--feature", "group.version=1") == (
        0, "group.version was upgraded to 1.\n")

    all_failed = "The update failed for all features since the following feature had an error: "
    assert feature_change(cli, cluster, "upgrade", "--feature", "transaction.version=7") == (
        1, f"Could not upgrade transaction.version to 7. {all_failed}Invalid update version 7 for feature "
           "transaction.version. Local controller 100 only supports versions 0-2\n")
    assert feature_change(cli, cluster, "upgrade", "--feature", "no.such.feature=1") == (
        1, f"Could not upgrade no.such.feature to 1. {all_failed}Invalid update version 1 for feature "
           "no.such.feature. Local controller 100 does not support this feature.\n")
    assert feature_change(cli, cluster, "downgrade", "--feature", "metadata.version=21") == (
        1, f"Could not downgrade metadata.version to 21. {all_failed}Unsupported metadata.version downgrade from 30 "
           "to 21. Refusing to perform the requested downgrade because it might delete metadata information.\n")
    assert feature_change(cli, cluster, "downgrade", "--unsafe", "--feature", "metadata.version=21") == (
        1, f"Could not downgrade metadata.version to 21. {all_failed}Unsupported metadata.version downgrade from 30 "
           "to 21. Unsafe metadata downgrade is not supported in this version.\n")
    assert feature_change(cli, cluster, "upgrade", "--feature", "metadata.version=30") == (
        0, "metadata.version was upgraded to 30.\n")
    assert feature_change(cli, cluster, "upgrade", "--feature", "group.version=1", "--feature",
                          "transaction.version=2") == (
        0, "group.version was upgraded to 1.\ntransaction.version was upgraded to 2.\n")


def test_kafka_cluster_unregister_removes_a_live_or_stopped_brokers_registration(cli: KafkaCli,
                                                                                 cluster: Cluster) -> None:
    def unregister(broker_id: int, *bootstrap: str) -> Result:
        return cli.run(CLUSTER, "unregister", *(bootstrap or ("--bootstrap-server", broker(cluster))),
                       "--id", str(broker_id), check=False)

    unknown = unregister(99)
    assert unknown.returncode == 1 and unknown.text == ""
    assert "BrokerIdNotRegisteredException: Broker ID 99 is not currently registered" in unknown.stderr

    # A live broker's registration is removed as well (Kafka's broker then runs on unregistered,
    # kbroker's registers again at its next heartbeat); a restart registers it on both.
    live = unregister(2)
    assert (live.returncode, live.text) == (0, "Broker 2 is no longer registered.\n")
    cluster.kill(2)
    cluster.start_node(2)
    cluster.wait_registered(cluster.broker_ids)

    cluster.stop(3)
    wait_for("broker 3 is fenced", lambda: 3 not in {b.node_id for b in cluster.metadata(1, []).brokers})
    removed = unregister(3)
    assert (removed.returncode, removed.text) == (0, "Broker 3 is no longer registered.\n")
    again = unregister(3, "--bootstrap-controller", controller(cluster))
    assert again.returncode == 1
    assert "BrokerIdNotRegisteredException: Broker ID 3 is not currently registered" in again.stderr

    cluster.start_node(3)  # a broker that starts again registers anew
    cluster.wait_registered(cluster.broker_ids)
