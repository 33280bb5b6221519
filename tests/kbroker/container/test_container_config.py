"""The image's configuration: apache/kafka's variable names, defaults filled key by key, any role
from the environment, a mounted file under the environment, and the entrypoint's written file."""

from __future__ import annotations

import pytest

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.container.container_config import log_level, merge, property_name, settings_from_env
from kbroker.container.entrypoint import serve_argv
from kbroker.node.meta_properties import META_PROPERTIES


@pytest.mark.parametrize(("variable", "key"), [
    ("KAFKA_NUM_PARTITIONS", "num.partitions"),
    ("KAFKA_LOG_RETENTION_MS", "log.retention.ms"),
    ("KAFKA_A__B", "a_b"),
    ("KAFKA_A___B", "a-b"),
    ("KAFKA_LISTENER_NAME_X___Y__Z_W", "listener.name.x-y_z.w"),
])
def test_variable_names_map_as_in_the_apache_kafka_image(variable: str, key: str) -> None:
    assert property_name(variable) == key


def test_jvm_and_log4j_variables_are_not_broker_keys() -> None:
    env = {"KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_OPTS": "-Dx", "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN", "PATH": "/bin"}
    assert settings_from_env(env) == {}
    assert log_level(env) == "WARNING"


def test_kubernetes_service_links_are_not_broker_keys() -> None:
    """A pod beside a Service named "kafka" gets these from Kubernetes; they must not stop the
    broker as unknown keys (KAFKA_PORT would be "port")."""
    env = {"KAFKA_PORT": "tcp://10.0.0.7:9092", "KAFKA_PORT_9092_TCP": "tcp://10.0.0.7:9092",
           "KAFKA_PORT_9092_TCP_ADDR": "10.0.0.7", "KAFKA_PORT_9092_TCP_PORT": "9092",
           "KAFKA_PORT_9092_TCP_PROTO": "tcp", "KAFKA_SERVICE_HOST": "10.0.0.7", "KAFKA_SERVICE_PORT": "9092",
           "KAFKA_SERVICE_PORT_CLIENT": "9092", "KAFKA_NUM_PARTITIONS": "3"}
    assert settings_from_env(env) == {"num.partitions": ("3", "KAFKA_NUM_PARTITIONS")}
    assert merge(env).values["num.partitions"] == "3"


def test_one_variable_alone_keeps_every_other_default() -> None:
    settings = merge({"KAFKA_NUM_PARTITIONS": "5"})
    assert settings.values == {
        "node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "log.dirs": "/var/lib/kbroker/data", "group.initial.rebalance.delay.ms": "0",
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        "advertised.listeners": "PLAINTEXT://localhost:9092", "num.partitions": "5",
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "kbroker.http.listeners": "http://0.0.0.0:8080",
    }
    assert settings.origins["num.partitions"] == "environment variable KAFKA_NUM_PARTITIONS"
    assert settings.origins["listeners"] == "image default"


def test_the_http_listener_is_on_unless_emptied() -> None:
    assert merge({}).values["kbroker.http.listeners"] == "http://0.0.0.0:8080"
    assert merge({"KAFKA_KBROKER_HTTP_LISTENERS": ""}).values["kbroker.http.listeners"] == ""


def test_internal_topics_have_one_replica_only_where_one_node_is_the_cluster() -> None:
    """As the apache/kafka image's server.properties: a lone combined node's consumer groups and
    transactions work; a node of a larger quorum keeps Kafka's defaults (3 replicas)."""
    alone = merge({}).values
    assert alone["offsets.topic.replication.factor"] == "1"
    member = merge({"KAFKA_CONTROLLER_QUORUM_VOTERS": "1@a:9093,2@b:9093,3@c:9093"}).values
    assert "offsets.topic.replication.factor" not in member
    broker = merge({"KAFKA_CONTROLLER_QUORUM_VOTERS": "100@controller:9093", "KAFKA_PROCESS_ROLES": "broker"}).values
    assert "transaction.state.log.replication.factor" not in broker


def test_listeners_follow_the_advertised_ports() -> None:
    settings = merge({"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://example:19092"})
    assert settings.values["listeners"] == "PLAINTEXT://0.0.0.0:19092,CONTROLLER://0.0.0.0:9093"


def test_controller_and_broker_roles_from_the_environment() -> None:
    voters = {"KAFKA_CONTROLLER_QUORUM_VOTERS": "100@controller:9093"}
    controller = merge({**voters, "KAFKA_NODE_ID": "100", "KAFKA_PROCESS_ROLES": "controller"}).values
    assert controller["listeners"] == "CONTROLLER://0.0.0.0:9093"
    assert "advertised.listeners" not in controller
    broker = merge({**voters, "KAFKA_NODE_ID": "2", "KAFKA_PROCESS_ROLES": "broker",
                    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker-2:9192"}).values
    assert broker["listeners"] == "PLAINTEXT://0.0.0.0:9192"
    for values, role in ((controller, "controller"), (broker, "broker")):
        config = KafkaConfig.load(None, [f"{k}={v}" for k, v in values.items()])
        assert config.process_roles == {role} and config.quorum_voters == [(100, "controller", 9093)]


def test_a_cluster_role_needs_the_voters() -> None:
    with pytest.raises(ConfigError, match="KAFKA_CONTROLLER_QUORUM_VOTERS"):
        merge({"KAFKA_PROCESS_ROLES": "broker"})


def test_an_unknown_variable_is_named() -> None:
    with pytest.raises(ConfigError, match=r"'num\.partitons' \(from environment variable KAFKA_NUM_PARTITONS\)"):
        merge({"KAFKA_NUM_PARTITONS": "5"})


def test_the_environment_wins_over_the_mounted_file_which_wins_over_the_defaults() -> None:
    settings = merge({"KAFKA_NUM_PARTITIONS": "4"}, "num.partitions=2\nlog.dirs=/data\n", "/mnt/server.properties")
    assert settings.values["num.partitions"] == "4"
    assert (settings.values["log.dirs"], settings.origins["log.dirs"]) == ("/data", "/mnt/server.properties:2")
    assert settings.origins["node.id"] == "image default"


def test_the_entrypoint_writes_what_serve_loads(tmp_path) -> None:
    final = tmp_path / "server.properties"
    data = tmp_path / "data"
    argv = serve_argv({"KAFKA_LOG_DIRS": str(data), "CLUSTER_ID": "5L6g3nShT-eMCtK--X86sw",
                       "KAFKA_LOG4J_ROOT_LOGLEVEL": "debug"}, str(tmp_path / "absent"), str(final))
    assert argv == ["serve", "--config", str(final), "--log-level", "DEBUG"]
    config = KafkaConfig.load(str(final))
    assert config.log_dirs == [str(data)]
    assert config.sources["log.dirs"].startswith(f"{final}:")
    # CLUSTER_ID stays in the environment for `serve` (which writes and checks meta.properties);
    # KAFKA_CLUSTER_ID is no broker key.
    assert not (data / META_PROPERTIES).exists()
    assert "cluster.id" not in merge({"KAFKA_CLUSTER_ID": "5L6g3nShT-eMCtK--X86sw"}).values


def test_the_entrypoint_never_prints_a_password(tmp_path, capsys) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    mounted = tmp_path / "mounted.properties"
    mounted.write_text(f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n")
    serve_argv({"KAFKA_LOG_DIRS": str(tmp_path / "data"), "KAFKA_SSL_KEYSTORE_PASSWORD": "store-secret"},
               str(mounted), str(tmp_path / "server.properties"))
    printed = capsys.readouterr().err
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config=[hidden]" in printed
    assert "ssl.keystore.password=[hidden]" in printed
    assert "secret" not in printed
