"""Admin and offset APIs against a real broker process, through kafka-python and
confluent-kafka (and bare requests where no client exposes the API): the codes and values a
user relies on."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import TopicAlreadyExistsError
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.find_coordinator.v3 import request as find_coordinator_v3
from kio.schema.find_coordinator.v6 import request as find_coordinator_v6
from kio.schema.list_offsets.v9 import request as list_offsets
from kio.schema.offset_for_leader_epoch.v4 import request as offset_for_leader_epoch

from tests.broker_process import BrokerProcess

from .clients import (
    BASE_TS,
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    code,
    create,
    new_name,
    produce,
    producer_id,
    topic_configs,
)
from .wire import call


def test_create_topics_answers_counts_topic_id_and_resolved_configs(kadmin: KafkaAdminClient) -> None:
    name = new_name()
    response = kadmin.create_topics([KNewTopic(name, 3, 1, topic_configs={"retention.ms": "3600000"})])
    (result,) = response["topics"]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 3, 1)
    assert result["topic_id"] is not None
    assert result["configs"]["retention.ms"]["value"] == "3600000"
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert result["configs"]["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    with pytest.raises(TopicAlreadyExistsError):
        kadmin.create_topics([KNewTopic(name, 1, 1)])


def test_create_topics_errors_per_topic(cadmin: AdminClient) -> None:
    ok, dry = new_name(), new_name()
    futures = cadmin.create_topics([
        NewTopic(ok, 2, replica_assignment=[[1], [1]]),
        NewTopic(new_name(), 1, replica_assignment=[[2]]),
        NewTopic("bad name!", 1, 1),
        NewTopic(new_name(), 1, 3),
        NewTopic(new_name(), 1, 1, config={"retention.ms": "soon"}),
    ])
    assert [code(f) for f in futures.values()] == [0, 39, 17, 38, 40]
    assert len(cadmin.list_topics(ok, timeout=10).topics[ok].partitions) == 2
    assert code(cadmin.create_topics([NewTopic(dry, 1, 1)], validate_only=True)[dry]) == 0
    assert dry not in cadmin.list_topics(timeout=10).topics


def test_delete_topics(cadmin: AdminClient) -> None:
    name = create(cadmin)
    futures = cadmin.delete_topics([name, "no-such-topic"])
    assert (code(futures[name]), code(futures["no-such-topic"])) == (0, 3)
    assert name not in cadmin.list_topics(timeout=10).topics


def test_topic_deletion_disabled(tmp_path) -> None:
    proc = BrokerProcess(str(tmp_path / "data"), {"delete.topic.enable": "false"})
    proc.start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        name = create(admin)
        assert code(admin.delete_topics([name])[name]) == 73  # TOPIC_DELETION_DISABLED
    finally:
        proc.close()


def test_create_partitions(cadmin: AdminClient) -> None:
    name = create(cadmin)
    assert code(cadmin.create_partitions([NewPartitions(name, 3)])[name]) == 0
    assert len(cadmin.list_topics(name, timeout=10).topics[name].partitions) == 3
    assert code(cadmin.create_partitions([NewPartitions(name, 2)])[name]) == 37
    assert code(cadmin.create_partitions([NewPartitions(name, 4, [[2]])])[name]) == 39
    assert code(cadmin.create_partitions([NewPartitions("no-such-topic", 2)])["no-such-topic"]) == 3


def test_describe_configs_topic_and_broker(cadmin: AdminClient, broker: BrokerProcess) -> None:
    name = create(cadmin, retention_ms="7200000")
    configs = topic_configs(cadmin, name)
    assert configs["retention.ms"] == ("7200000", DYNAMIC_TOPIC_CONFIG)
    assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
    future = cadmin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entries = next(iter(future.values())).result(10)
    assert entries["log.dirs"].value == broker.data_dir
    assert int(entries["log.dirs"].source) == STATIC_BROKER_CONFIG
    assert entries["log.dirs"].is_read_only
    assert (entries["num.partitions"].value, int(entries["num.partitions"].source)) == ("1", DEFAULT_CONFIG)
    unknown = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "no-such-topic")])
    assert code(next(iter(unknown.values()))) == 3


def test_describe_broker_configs_by_id(broker: BrokerProcess) -> None:
    def resource(kind: int, name: str) -> object:
        return describe_configs.DescribeConfigsResource(
            resource_type=kind, resource_name=name, configuration_keys=("num.partitions",)
        )

    resources = (resource(4, "1"), resource(4, ""), resource(4, "2"))
    request = describe_configs.DescribeConfigsRequest(resources=resources)
    mine, defaults, other = call(broker.bootstrap, request, 4).results
    assert (mine.error_code, mine.error_message, len(mine.configs)) == (0, "", 1)
    assert (defaults.error_code, defaults.configs) == (0, ())  # "": cluster-wide defaults; num.partitions is none
    assert other.error_code == 42
    assert other.error_message == "Unexpected broker id, expected 1 or empty string, but received 2"


def test_alter_configs_replaces_every_override(cadmin: AdminClient) -> None:
    name = create(cadmin, retention_ms="7200000", segment_ms="3600000")
    future = cadmin.alter_configs([ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "60000"})])
    assert code(next(iter(future.values()))) == 0
    configs = topic_configs(cadmin, name)
    assert configs["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
    assert configs["segment.ms"] == ("604800000", DEFAULT_CONFIG)
    bad = cadmin.alter_configs([ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "x"})])
    assert code(next(iter(bad.values()))) == 40
    # Broker 1's dynamic configs are replaced as a whole too (a key other tests do not feel).
    dynamic = cadmin.alter_configs([ConfigResource(ResourceType.BROKER, "1",
                                                   set_config={"log.cleaner.backoff.ms": "15001"})])
    assert code(next(iter(dynamic.values()))) == 0
    assert code(next(iter(cadmin.alter_configs([ConfigResource(ResourceType.BROKER, "1")]).values()))) == 0
    static = cadmin.alter_configs([ConfigResource(ResourceType.BROKER, "1", set_config={"log.dirs": "/x"})])
    assert code(next(iter(static.values()))) == 42  # Cannot update these configs dynamically: [log.dirs]


def test_incremental_alter_configs(cadmin: AdminClient) -> None:
    name = create(cadmin, retention_ms="7200000")

    def alter(*ops: tuple[str, str | None, AlterConfigOpType]) -> int:
        entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = cadmin.incremental_alter_configs([resource])
        return code(next(iter(futures.values())))

    append, subtract = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    assert alter(("cleanup.policy", "compact", append), ("segment.ms", "3600000", AlterConfigOpType.SET)) == 0
    configs = topic_configs(cadmin, name)
    assert configs["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"] == ("7200000", DYNAMIC_TOPIC_CONFIG)  # untouched
    assert alter(("cleanup.policy", "delete", subtract), ("retention.ms", None, AlterConfigOpType.DELETE)) == 0
    configs = topic_configs(cadmin, name)
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"] == ("604800000", DEFAULT_CONFIG)
    assert alter(("retention.ms", "1", append)) == 40  # not a LIST config


def test_list_offsets(cadmin: AdminClient, broker: BrokerProcess) -> None:
    name = create(cadmin)
    produce(broker.bootstrap, name, 5)
    tp = TopicPartition(name, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 5}
        found = consumer.offsets_for_times({tp: BASE_TS + 1500})[tp]
        assert (found.offset, found.timestamp) == (2, BASE_TS + 2000)
        assert consumer.offsets_for_times({tp: BASE_TS + 10**6}) == {tp: None}
    finally:
        consumer.close()
    futures = cadmin.list_offsets({CTopicPartition(name, 0): OffsetSpec.max_timestamp()})
    latest = next(iter(futures.values())).result(10)
    assert (latest.offset, latest.timestamp) == (4, BASE_TS + 4000)

    def ask(partition: int, timestamp: int) -> object:
        part = list_offsets.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
        topic = list_offsets.ListOffsetsTopic(name=name, partitions=(part,))
        request = list_offsets.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(topic,))
        return call(broker.bootstrap, request, 9).topics[0].partitions[0]

    tiered = ask(0, -5)  # latest-tiered: no tiered storage
    assert (tiered.error_code, tiered.offset, tiered.timestamp) == (0, -1, -1)
    assert ask(7, -1).error_code == 3
    assert ask(0, -9).error_code == 35  # not a sentinel Kafka knows


def test_delete_records(cadmin: AdminClient, broker: BrokerProcess) -> None:
    name = create(cadmin)
    produce(broker.bootstrap, name, 5)
    (future,) = cadmin.delete_records([CTopicPartition(name, 0, 3)]).values()
    assert future.result(10).low_watermark == 3
    (future,) = cadmin.list_offsets({CTopicPartition(name, 0): OffsetSpec.earliest()}).values()
    assert future.result(10).offset == 3
    (beyond,) = cadmin.delete_records([CTopicPartition(name, 0, 99)]).values()
    assert code(beyond) == 1  # OFFSET_OUT_OF_RANGE
    (to_end,) = cadmin.delete_records([CTopicPartition(name, 0, -1)]).values()
    assert to_end.result(10).low_watermark == 5
    compacted = create(cadmin, cleanup_policy="compact")
    (refused,) = cadmin.delete_records([CTopicPartition(compacted, 0, 0)]).values()
    assert code(refused) == 44  # POLICY_VIOLATION


def test_deleted_records_and_producer_ids_survive_kill_9(fresh_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    name = create(admin)
    produce(fresh_broker.bootstrap, name, 5)
    (future,) = admin.delete_records([CTopicPartition(name, 0, 3)]).values()
    assert future.result(10).low_watermark == 3
    _error, before, _epoch = producer_id(fresh_broker.bootstrap)
    fresh_broker.kill()
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    (future,) = admin.list_offsets({CTopicPartition(name, 0): OffsetSpec.earliest()}).values()
    assert future.result(10).offset == 3
    error, after, epoch = producer_id(fresh_broker.bootstrap)
    assert (error, epoch) == (0, 0) and after > before


def test_init_producer_id(broker: BrokerProcess) -> None:
    first, second = producer_id(broker.bootstrap), producer_id(broker.bootstrap)
    assert first[0] == second[0] == 0 and first[1] != second[1] and first[2] == second[2] == 0
    txn_first, txn_again = producer_id(broker.bootstrap, "txn"), producer_id(broker.bootstrap, "txn")
    assert txn_first[0] == txn_again[0] == 0 and txn_first[1] == txn_again[1]  # same id,
    assert (txn_first[2], txn_again[2]) == (0, 1)  # epoch bumped: the old session is fenced
    assert producer_id(broker.bootstrap, "txn", pid=txn_first[1], epoch=0)[0] == 90  # PRODUCER_FENCED
    assert producer_id(broker.bootstrap, pid=first[1])[0] == 42  # id without epoch


def test_describe_log_dirs(kadmin: KafkaAdminClient, cadmin: AdminClient, broker: BrokerProcess) -> None:
    name = create(cadmin)
    produce(broker.bootstrap, name, 3)
    (node,) = kadmin.describe_log_dirs()
    (log_dir,) = node["log_dirs"]
    assert (log_dir["error_code"], log_dir["log_dir"]) == (0, broker.data_dir)
    sizes = {t["name"]: t["partitions"][0]["partition_size"] for t in log_dir["topics"]}
    assert sizes[name] > 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0


def test_describe_cluster(kadmin: KafkaAdminClient, cadmin: AdminClient, broker: BrokerProcess) -> None:
    cluster = kadmin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
    described = cadmin.describe_cluster().result(10)
    assert described.cluster_id == cluster["cluster_id"] and described.controller.id == 1


def test_describe_topic_partitions_pages_with_a_cursor(kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    name = create(cadmin, partitions=5)
    page = kadmin.describe_topic_partitions([name, "no-such-topic"], response_partition_limit=3)
    by_name = {t["name"]: t for t in page["topics"]}
    assert by_name["no-such-topic"]["error_code"] == 3
    assert [p["partition_index"] for p in by_name[name]["partitions"]] == [0, 1, 2]
    assert page["next_cursor"] == {"topic_name": name, "partition_index": 3}
    rest = kadmin.describe_topic_partitions([name], cursor=page["next_cursor"])
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [3, 4]
    assert rest["next_cursor"] is None


def test_offset_for_leader_epoch(cadmin: AdminClient, broker: BrokerProcess) -> None:
    name = create(cadmin)
    produce(broker.bootstrap, name, 3)
    asks = ((-1, 0), (1, 0), (-1, 7))  # (current_leader_epoch, leader_epoch)
    parts = tuple(
        offset_for_leader_epoch.OffsetForLeaderPartition(partition=0, current_leader_epoch=c, leader_epoch=e)
        for c, e in asks
    )
    topics = (offset_for_leader_epoch.OffsetForLeaderTopic(topic=name, partitions=parts),)
    request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(replica_id=-1, topics=topics)
    response = call(broker.bootstrap, request, 4)
    answers = [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
    assert answers == [(0, 0, 3), (75, -1, -1), (0, -1, -1)]  # UNKNOWN_LEADER_EPOCH; epoch unknown


def test_find_coordinator_names_this_broker(broker: BrokerProcess) -> None:
    single = call(broker.bootstrap, find_coordinator_v3.FindCoordinatorRequest(key="group", key_type=0), 3)
    assert (single.error_code, single.node_id, single.port) == (0, 1, broker.port)
    request = find_coordinator_v6.FindCoordinatorRequest(key_type=1, coordinator_keys=("a", "b"))
    many = call(broker.bootstrap, request, 6).coordinators
    assert [(c.key, c.error_code, c.node_id) for c in many] == [("a", 0, 1), ("b", 0, 1)]
    share = call(broker.bootstrap, find_coordinator_v6.FindCoordinatorRequest(key_type=2, coordinator_keys=("s",)), 6)
    assert share.coordinators[0].error_code == 42
