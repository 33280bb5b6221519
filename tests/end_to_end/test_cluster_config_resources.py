"""GROUP and CLIENT_METRICS configs in a replicated cluster: set through one broker, they are
ConfigRecords in the metadata log, so every broker describes and lists them (as in Kafka, where
each broker replays them), and a restarted broker still has them."""

from __future__ import annotations

import time
from typing import Any

from kio.schema.describe_configs.v4 import request as describe
from kio.schema.incremental_alter_configs.v1 import request as alter
from kio.schema.list_config_resources.v1 import request as list_resources
from kio.static.primitive import i8

from compat.scenarios.protocol import RawConnection

GROUP, CLIENT_METRICS = 32, 16
DEADLINE_S = 15.0


def ask(bootstrap: str, api_key: int, version: int, body: Any) -> Any:
    conn = RawConnection(bootstrap)
    try:
        return conn.request(api_key, version, body)
    finally:
        conn.close()


def described(bootstrap: str, kind: int, name: str) -> dict[str, tuple[str | None, int]]:
    answer = ask(bootstrap, 32, 4, describe.DescribeConfigsRequest(
        resources=(describe.DescribeConfigsResource(resource_type=i8(kind), resource_name=name,
                                                     configuration_keys=None),),
        include_synonyms=False, include_documentation=False))
    return {c.name: (c.value, int(c.config_source)) for c in answer.results[0].configs}


def listed(bootstrap: str) -> list[tuple[int, str]]:
    answer = ask(bootstrap, 74, 1, list_resources.ListConfigResourcesRequest(
        resource_types=(i8(GROUP), i8(CLIENT_METRICS))))
    return sorted((int(c.resource_type), c.resource_name) for c in answer.config_resources)


def until(probe: Any, wanted: Any) -> Any:
    """Poll ``probe`` until it returns ``wanted`` or the deadline passes; the last value."""
    deadline = time.monotonic() + DEADLINE_S
    value = probe()
    while value != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
        value = probe()
    return value


def test_group_and_client_metrics_configs_reach_every_broker(kbroker_cluster):
    first, *others = kbroker_cluster.brokers
    answer = ask(first.bootstrap_servers, 44, 1, alter.IncrementalAlterConfigsRequest(validate_only=False, resources=(
        alter.AlterConfigsResource(resource_type=i8(GROUP), resource_name="g", configs=(
            alter.AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=i8(0), value="6000"),)),
        alter.AlterConfigsResource(resource_type=i8(CLIENT_METRICS), resource_name="s", configs=(
            alter.AlterableConfig(name="interval.ms", config_operation=i8(0), value="1000"),)),
    )))
    assert [r.error_code.value for r in answer.responses] == [0, 0]
    for broker in [first, *others]:
        bootstrap = broker.bootstrap_servers
        assert until(lambda b=bootstrap: described(b, GROUP, "g")["consumer.heartbeat.interval.ms"],
                     ("6000", 8)) == ("6000", 8)
        assert until(lambda b=bootstrap: described(b, CLIENT_METRICS, "s")["interval.ms"],
                     ("1000", 7)) == ("1000", 7)
        assert until(lambda b=bootstrap: listed(b), [(CLIENT_METRICS, "s"), (GROUP, "g")]) == [
            (CLIENT_METRICS, "s"), (GROUP, "g")]
    restarted = others[-1]
    restarted.restart()
    assert until(lambda: described(restarted.bootstrap_servers, GROUP, "g")["consumer.heartbeat.interval.ms"],
                 ("6000", 8)) == ("6000", 8)
