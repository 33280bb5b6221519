"""The Dispatcher is generic over the services a node lends its handlers: a handler table and an
object with the services those handlers declare are all it needs — no Broker, no ControllerNode."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

from kbroker.protocol.codec import API_VERSIONS_KEY
from kbroker.protocol.errors import ErrorCode
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.elect_leaders.v1.request import ElectLeadersRequest
from kio.serial import entity_reader
from kio.static.primitive import i8

from kbroker.handlers import api_versions, describe_cluster, elect_leaders
from kbroker.handlers.security import SecurityFeatures
from kbroker.handlers.services import BrokerEndpoint
from kbroker.network.dispatcher import Dispatcher
from tests.kbroker.handlers.wire import request_frame


@dataclass
class Cluster:
    """A ClusterView of two live brokers."""

    node_id: int = 1
    cluster_id: str = "dispatcher-test"
    controller_id: int = 2

    def live_brokers(self, listener: str = "") -> list[BrokerEndpoint]:
        return [(1, "broker-1", 9092, None), (2, "broker-2", 9093, "rack-b")]

    def endpoint(self, broker_id: int, listener: str = "") -> tuple[str, int] | None:
        return None

    def finalized_features(self) -> tuple[int, dict[str, int]]:
        return 7, {"metadata.version": 30}


@dataclass
class ClusterOnly:
    """All DescribeCluster declares (``HasCluster``)."""

    cluster: Cluster = field(default_factory=Cluster)


def answer(dispatcher: Dispatcher[Any], request: Any, version: int) -> Any:
    """Dispatch one request frame and decode the response body."""
    frame = request_frame(request, version)[4:]  # the dispatcher gets frames without the size prefix
    response = asyncio.run(dispatcher.dispatch(bytearray(frame), "127.0.0.1", "127.0.0.1:1"))
    assert isinstance(response, bytes)
    schema = load_response_schema(request.__api_key__, version)
    # size, correlation id, and tagged fields in a flexible header (never ApiVersions', KIP-511)
    offset = 8 + (1 if schema.__flexible__ and request.__api_key__ != API_VERSIONS_KEY else 0)
    body, _size = entity_reader(schema)(memoryview(response), offset)
    return body


def table(*modules: ModuleType) -> dict[int, ModuleType]:
    return {m.API_KEY: m for m in modules}


def test_a_handler_is_answered_from_the_services_it_declares() -> None:
    dispatcher = Dispatcher(ClusterOnly(), table(describe_cluster))
    body = answer(dispatcher, DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
    assert body.error_code == ErrorCode.none
    assert (body.cluster_id, body.controller_id) == ("dispatcher-test", 2)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in body.brokers] == [
        (1, "broker-1", 9092, None), (2, "broker-2", 9093, "rack-b")]


def test_api_versions_lists_the_table_the_request_was_dispatched_from() -> None:
    dispatcher = Dispatcher(ClusterOnly(), table(api_versions, describe_cluster))
    body = answer(dispatcher, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert body.error_code == ErrorCode.none
    assert sorted(k.api_key for k in body.api_keys) == sorted((api_versions.API_KEY, describe_cluster.API_KEY))
    assert [(f.name, f.max_version_level) for f in body.finalized_features] == [("metadata.version", 30)]
    assert body.finalized_features_epoch == 7


def test_a_forwarded_api_goes_to_the_controller_unchanged() -> None:
    forwarded: list[tuple[int, int, Any]] = []

    async def forward(api_key: int, api_version: int, request: object) -> object | None:
        forwarded.append((api_key, api_version, request))
        return None  # the controller did not answer

    dispatcher = Dispatcher(SimpleNamespace(security=SecurityFeatures()), table(elect_leaders), forward)
    request = ElectLeadersRequest(election_type=i8(0), topic_partitions=None)
    body = answer(dispatcher, request, 1)
    assert forwarded == [(elect_leaders.API_KEY, 1, request)]
    assert body.error_code == ErrorCode.request_timed_out
