"""The controller quorum as the cluster tests see it: Kafka's own `kafka-metadata-quorum` tool
names the active controller, and CreateTopics is sent until a (new) active controller answers."""

from __future__ import annotations

import re
import subprocess
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from compat.cluster import Cluster
from compat.deps import kafka_classpath


def describe_quorum(cluster: Cluster, *, replication: bool = False) -> str:
    """``kafka-metadata-quorum describe --status`` (or ``--replication``) over every voter."""
    run = subprocess.run(
        ["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.MetadataQuorumCommand",
         "--bootstrap-controller", cluster.controller_bootstrap, "describe",
         "--replication" if replication else "--status"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def active_controller(cluster: Cluster) -> int:
    """The quorum leader, as ``kafka-metadata-quorum describe --status`` names it."""
    status = describe_quorum(cluster)
    found = re.search(r"^LeaderId:\s+(\d+)$", status, re.MULTILINE)
    assert found is not None, status
    return int(found.group(1))


def create_topic_until_answered(bootstrap: str, name: str, deadline: float) -> None:
    """CreateTopics (3 partitions, RF 3) until the active controller answers it.

    Each attempt has a new admin client, so fresh metadata: the broker a client sends admin
    requests to is the "controller" its Metadata named, a random live broker (Kafka's and
    kbroker's answer), and an earlier answer may have named one that has stopped answering.
    An attempt that got no answer may still have created the topic, so TOPIC_ALREADY_EXISTS on
    a later one is the answer it missed."""
    attempt = 0
    while True:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([NewTopic(name, 3, 3)])[name].result(timeout=10)
            return
        except KafkaException as exc:  # NOT_CONTROLLER and the like while the quorum elects
            if attempt > 0 and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            failure: BaseException = exc
        except TimeoutError as exc:  # no answer yet
            failure = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"no topic creation before the deadline: {failure!r}") from None
        attempt += 1
        time.sleep(0.1)
