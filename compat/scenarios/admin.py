"""Topic administration: create (with configs, invalid input, duplicates, validate-only),
delete, re-create, add partitions, list and describe topics."""

from __future__ import annotations

from typing import Any

from compat.scenarios import Run, scenario

CREATE = "admin.create_topic"
DESCRIBE = "admin.describe_topic"


def mine(run: Run, listing: Any) -> Any:
    """Only this run's topics from a topic listing (names, or a CLI's output lines)."""
    prefix = run.name()
    if isinstance(listing, dict) and "stdout" in listing:
        return {**listing, "stdout": [line for line in listing["stdout"] if line.startswith(prefix)]}
    if isinstance(listing, list):
        return [name for name in listing if name.startswith(prefix)]
    return listing


@scenario("admin/create-describe", needs={CREATE, DESCRIBE})
def create_describe(run: Run) -> Any:
    """Create a 3-partition topic, then describe it: partitions, leader, replicas, ISR."""
    t = run.name()
    created = run.client.create_topic(t, partitions=3)
    run.harness.wait_topic(t, 3)
    return {"create": created, "describe": run.client.describe_topic(t)}


@scenario("admin/create-with-configs", needs={CREATE, "admin.describe_configs"})
def create_with_configs(run: Run) -> Any:
    """Create with topic-level overrides; they come back as DYNAMIC_TOPIC_CONFIG values."""
    t = run.name()
    configs = {"retention.ms": "86400000", "cleanup.policy": "compact", "max.message.bytes": "65536",
               "segment.bytes": "1048576", "message.timestamp.type": "LogAppendTime"}  # fmt: skip
    created = run.client.create_topic(t, configs=configs)
    run.harness.wait_topic(t, 1)
    return {"create": created, "configs": run.client.describe_configs("topic", t, keys=sorted(configs))}


@scenario("admin/create-invalid-names", needs={CREATE})
def create_invalid_names(run: Run) -> Any:
    """Names Kafka refuses (space, slash, '.', '..', 250 chars) and the longest legal one."""
    base = run.name()
    names = {"space": f"{base} x", "slash": f"{base}/x", "dot": ".", "dotdot": "..",
             "len250": base.ljust(250, "x"), "len249": base.ljust(249, "x")}  # fmt: skip
    return {label: run.client.create_topic(name) for label, name in names.items()}


@scenario("admin/create-duplicate", needs={CREATE})
def create_duplicate(run: Run) -> Any:
    """Creating an existing topic fails with TOPIC_ALREADY_EXISTS."""
    t = run.topic()
    return run.client.create_topic(t)


@scenario("admin/create-zero-partitions", needs={CREATE})
def create_zero_partitions(run: Run) -> Any:
    """Zero partitions is INVALID_PARTITIONS."""
    return run.client.create_topic(run.name(), partitions=0)


@scenario("admin/create-bad-replication-factor", needs={CREATE})
def create_bad_replication_factor(run: Run) -> Any:
    """More replicas than brokers, or none: INVALID_REPLICATION_FACTOR."""
    return {"rf3": run.client.create_topic(run.name("a"), rf=3), "rf0": run.client.create_topic(run.name("b"), rf=0)}


@scenario("admin/create-invalid-configs", needs={CREATE})
def create_invalid_configs(run: Run) -> Any:
    """Unknown key, malformed value, value out of range (segment.bytes < 1 MiB on Kafka 4), bad enum."""
    cases = {"unknown-key": {"no.such.config": "1"}, "not-a-number": {"retention.ms": "soon"},
             "segment-bytes-below-min": {"segment.bytes": "1048575"}, "bad-policy": {"cleanup.policy": "shred"},
             "bad-timestamp-type": {"message.timestamp.type": "WallTime"}}  # fmt: skip
    return {label: run.client.create_topic(run.name(label), configs=configs) for label, configs in cases.items()}


@scenario("admin/create-validate-only", needs={CREATE, "admin.validate_only"})
def create_validate_only(run: Run) -> Any:
    """validate_only answers as a create would, and creates nothing."""
    t = run.name()
    return {
        "valid": run.client.create_topic(t, partitions=2, validate_only=True),
        "invalid": run.client.create_topic(run.name("bad"), rf=3, validate_only=True),
        "exists_after": run.harness.partition_leaders(t) is not None,
    }


@scenario("admin/delete", needs={"admin.delete_topic"})
def delete(run: Run) -> Any:
    """Delete a topic; it disappears from metadata; deleting it again is UNKNOWN_TOPIC_OR_PARTITION."""
    t = run.topic()
    first = run.client.delete_topic(t)
    gone = run.harness.wait_topic_gone(t)
    return {"delete": first, "gone": gone, "again": run.client.delete_topic(t)}


@scenario("admin/delete-unknown", needs={"admin.delete_topic"})
def delete_unknown(run: Run) -> Any:
    """Deleting a topic that never existed."""
    return run.client.delete_topic(run.name())


@scenario("admin/recreate-after-delete", needs={"admin.delete_topic", CREATE})
def recreate_after_delete(run: Run) -> Any:
    """Delete a topic holding records and create it again: the new one starts empty at 0."""
    t = run.topic()
    run.harness.put(t, run.recs(3))
    deleted = run.client.delete_topic(t)
    gone = run.harness.wait_topic_gone(t)
    created = run.client.create_topic(t, partitions=2)
    run.harness.wait_topic(t, 2)
    return {"delete": deleted, "gone": gone, "create": created, "offsets": run.harness.offsets(t)}


@scenario("admin/create-partitions", needs={"admin.create_partitions", DESCRIBE})
def create_partitions(run: Run) -> Any:
    """Grow a topic from 1 to 4 partitions; the new ones are led and empty."""
    t = run.topic()
    grown = run.client.create_partitions(t, 4)
    run.harness.wait_topic(t, 4)
    return {"create_partitions": grown, "describe": run.client.describe_topic(t),
            "new_partition_offsets": run.harness.offsets(t, 3)}  # fmt: skip


@scenario("admin/create-partitions-invalid", needs={"admin.create_partitions"})
def create_partitions_invalid(run: Run) -> Any:
    """Same count or fewer partitions: INVALID_PARTITIONS; unknown topic: UNKNOWN_TOPIC_OR_PARTITION."""
    t = run.topic(partitions=2)
    return {"same": run.client.create_partitions(t, 2), "fewer": run.client.create_partitions(t, 1),
            "unknown_topic": run.client.create_partitions(run.name("missing"), 3)}  # fmt: skip


@scenario("admin/create-excessive-partitions", needs={CREATE})
def create_excessive_partitions(run: Run) -> Any:
    """More than 10,000 partitions in one request: POLICY_VIOLATION at once, nothing created."""
    return {str(n): run.client.create_topic(run.name(str(n)), partitions=n) for n in (100_000, 10_001)}


@scenario("admin/create-partitions-excessive", needs={CREATE, "admin.create_partitions", "admin.validate_only"})
def create_partitions_excessive(run: Run) -> Any:
    """Adding more than 10,000 partitions in one request (validate-only: Kafka really adds them
    when asked to, see known_differences): refused, the count unchanged."""
    t = run.name()
    run.client.create_topic(t)
    run.harness.wait_topic(t, 1)
    grow = run.client.create_partitions(t, 10_002, validate_only=True)
    return {"grow": grow, "describe": run.client.describe_topic(t)}


@scenario("admin/create-partitions-validate-only", needs={"admin.create_partitions", "admin.validate_only"})
def create_partitions_validate_only(run: Run) -> Any:
    """validate_only checks the new count and leaves the topic as it was."""
    t = run.topic()
    answer = run.client.create_partitions(t, 3, validate_only=True)
    leaders = run.harness.partition_leaders(t)
    return {"answer": answer, "partitions_after": sorted(leaders or {})}


@scenario("admin/list-topics", needs={"admin.list_topics"})
def list_topics(run: Run) -> Any:
    """Listing shows the topics created for this run (others are filtered out)."""
    run.topic("one")
    run.topic("two", partitions=2)
    return mine(run, run.client.list_topics())


@scenario("admin/internal-topics", needs={"admin.list_topics"}, clients=("java",))
def internal_topics(run: Run) -> Any:
    """Metadata flags __consumer_offsets internal (the Java Admin client's TopicListing.isInternal;
    its listTopics() leaves such topics out, as do consumers' pattern subscriptions)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    t = run.topic()
    admin = AdminClient({"bootstrap.servers": run.client.bootstrap})
    group = run.name("g")  # a committed offset: __consumer_offsets exists (the admin client finds the coordinator)
    offsets = ConsumerGroupTopicPartitions(group, [TopicPartition(t, 0, 0)])
    admin.alter_consumer_group_offsets([offsets])[group].result(30)
    return run.client._call("internal_topics")  # AdminOps in the driver JVM


@scenario("admin/describe-unknown-topic", needs={DESCRIBE})
def describe_unknown_topic(run: Run) -> Any:
    """Describing a missing topic reports UNKNOWN_TOPIC_OR_PARTITION (auto-creation is off)."""
    return run.client.describe_topic(run.name())


@scenario("admin/describe-cluster", needs={"admin.describe_cluster"})
def describe_cluster(run: Run) -> Any:
    """Cluster id, controller and brokers (node 1 at the target's address)."""
    return run.client.describe_cluster()


@scenario("admin/authorized-operations", needs={"admin.describe_cluster", DESCRIBE},
          clients=("confluent", "kafka-python", "java"))
def authorized_operations(run: Run) -> Any:
    """Cluster and topic authorized operations asked for (librdkafka: Metadata's
    include_cluster/topic_authorized_operations; kafka-python and the Java Admin client:
    DescribeCluster, and Metadata or DescribeTopicPartitions):
    without an authorizer every operation Kafka defines on the resource."""
    t = run.topic()
    if run.client.name == "java":  # AdminOps.authorizedOperations in the driver JVM
        return run.client._call("authorized_operations", topic=t)
    admin = run.client.admin
    if run.client.name == "confluent":
        from confluent_kafka import TopicCollection

        cluster = admin.describe_cluster(include_authorized_operations=True).result()
        (topic,) = admin.describe_topics(TopicCollection([t]), include_authorized_operations=True).values()
        return {"cluster": sorted(op.name for op in cluster.authorized_operations),
                "topic": sorted(op.name for op in topic.result().authorized_operations)}
    cluster = admin.describe_cluster()
    (topic,) = admin.describe_topics([t])
    return {"cluster": sorted(cluster["authorized_operations"]),
            "topic": sorted(topic["authorized_operations"])}
