"""UpdateFeatures, UnregisterBroker, DescribeQuorum and ApiVersions' features, handler by handler.

A broker's table forwards the three cluster-tool APIs unchanged to the controller (here the
controller's own dispatcher in process, as a combined node reaches it), whose handlers decide
through a real QuorumController over a metadata log on disk. Frames are encoded and decoded as
on the wire, at every version the handlers advertise. What Kafka 4.3.1 answers is the spec:
INVALID_UPDATE_VERSION (95) with "The update failed for all features since the following
feature had an error: ..." and no rows, NONE rows only at v0-1, BROKER_ID_NOT_REGISTERED (102),
REQUEST_TIMED_OUT when the controller does not answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig
from kio.index import load_response_schema
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.describe_quorum.v2 import request as describe_quorum_v2
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest
from kio.schema.update_features.v0 import request as update_v0
from kio.schema.update_features.v1 import request as update_v1
from kio.schema.update_features.v2 import request as update_v2
from kio.serial import entity_reader
from kio.static.primitive import i8, i16

from kbroker.cluster.controller_channel import LocalControllerClient
from kbroker.controller_handlers import CONTROLLER_HANDLERS
from kbroker.controller_handlers import api_versions as controller_api_versions
from kbroker.handlers import describe_quorum, unregister_broker, update_features
from kbroker.handlers.security import SecurityFeatures
from kbroker.network.dispatcher import Dispatcher
from tests.kbroker.handlers.wire import request_frame

ALL_FAILED = "The update failed for all features since the following feature had an error: "


@dataclass
class ControllerOnly:
    """What these controller handlers declare: the controller, its commits, the committed image,
    a clock."""

    controller: QuorumController
    clock: Clock = SYSTEM_CLOCK
    starting: bool = False  # a voter that has no committed image yet

    @property
    def committed_image(self) -> MetadataImage | None:
        return None if self.starting else self.controller.image  # one voter: all of it is committed

    async def committed(self) -> None:
        """A one-voter log commits each proposal at once."""


@pytest.fixture
def controller(tmp_path: Path) -> QuorumController:
    (tmp_path / "__cluster_metadata-0").mkdir()
    plog = PartitionLog(str(tmp_path / "__cluster_metadata-0"), "__cluster_metadata", 0, LogConfig())
    plog.load(clean_shutdown=False)
    raft_log = PartitionRaftLog(plog)
    settings = ControllerSettings(node_id=100, session_timeout_ms=2000, default_partitions=1,
                                  default_replication_factor=1, broker_default={"min.insync.replicas": "1"}.get)
    quorum_controller = QuorumController(plog, settings, lambda payloads: raft_log.append(1, payloads))
    quorum_controller.activate(1, now_ms=0)
    quorum_controller.bootstrap("handlers-test", [], now_ms=0)
    return quorum_controller


def broker_dispatcher(controller: QuorumController) -> Dispatcher[Any]:
    """A broker's table for the three forwarded APIs, forwarding to the controller in process."""
    local = LocalControllerClient(100, Dispatcher(ControllerOnly(controller), CONTROLLER_HANDLERS), "test")

    async def forward(api_key: int, api_version: int, request: object) -> object | None:
        return await local.request(api_key, api_version, request)

    modules = (describe_quorum, update_features, unregister_broker)
    # A broker without an authorizer: the forwarded APIs' local checks pass.
    return Dispatcher(SimpleNamespace(security=SecurityFeatures()), {m.API_KEY: m for m in modules}, forward)


def answer(dispatcher: Dispatcher[Any], request: Any, version: int) -> Any:
    frame = request_frame(request, version)[4:]
    response = asyncio.run(dispatcher.dispatch(bytearray(frame), "127.0.0.1", "127.0.0.1:1"))
    assert isinstance(response, bytes)
    # size, correlation id, and a flexible header's empty tag buffer (ApiVersions' header has none)
    offset = 8 + (0 if request.__api_key__ == 18 else 1)
    body, _size = entity_reader(load_response_schema(request.__api_key__, version))(memoryview(response), offset)
    return body


def update(version: int, feature: str, level: int, upgrade_type: int = 1, validate_only: bool = False) -> Any:
    m = {1: update_v1, 2: update_v2}[version]
    return m.UpdateFeaturesRequest(feature_updates=(m.FeatureUpdateKey(
        feature=feature, max_version_level=i16(level), upgrade_type=i8(upgrade_type)),), validate_only=validate_only)


def test_update_features_answers_each_version_as_kafka(controller: QuorumController) -> None:
    dispatcher = broker_dispatcher(controller)
    offset = controller.image.offset
    body = answer(dispatcher, update(1, "transaction.version", 1, upgrade_type=2, validate_only=True), 1)
    assert (body.error_code, [(r.feature, r.error_code) for r in body.results]) == (
        ErrorCode.none, [("transaction.version", ErrorCode.none)])
    assert controller.image.offset == offset and controller.image.features["transaction.version"] == 2

    body = answer(dispatcher, update(2, "transaction.version", 1, upgrade_type=2), 2)
    assert (body.error_code, body.error_message) == (ErrorCode.none, None)
    assert controller.image.features["transaction.version"] == 1

    body = answer(dispatcher, update(1, "transaction.version", 7), 1)
    assert (body.error_code, body.results) == (ErrorCode.invalid_update_version, ())
    assert body.error_message == (f"{ALL_FAILED}Invalid update version 7 for feature transaction.version. "
                                  "Local controller 100 only supports versions 0-2")


def test_update_features_v0_downgrades_only_when_allowed(controller: QuorumController) -> None:
    dispatcher = broker_dispatcher(controller)

    def v0(allow_downgrade: bool) -> Any:
        return update_v0.UpdateFeaturesRequest(feature_updates=(update_v0.FeatureUpdateKey(
            feature="group.version", max_version_level=i16(0), allow_downgrade=allow_downgrade),))

    refused = answer(dispatcher, v0(False), 0)
    assert refused.error_code == ErrorCode.invalid_update_version
    assert refused.error_message.endswith("Can't downgrade the version of this feature without setting the upgrade "
                                          "type to either safe or unsafe downgrade.")
    assert answer(dispatcher, v0(True), 0).error_code == ErrorCode.none
    assert "group.version" not in controller.image.features


def test_unregister_broker_removes_a_registration_or_says_it_has_none(controller: QuorumController) -> None:
    dispatcher = broker_dispatcher(controller)
    controller.register_broker(1, "incarnation-1", "127.0.0.1", 9092, None, now_ms=0)
    unknown = answer(dispatcher, UnregisterBrokerRequest(broker_id=7), 0)
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.broker_id_not_registered, "Broker ID 7 is not currently registered")
    removed = answer(dispatcher, UnregisterBrokerRequest(broker_id=1), 0)
    assert (removed.error_code, removed.error_message) == (ErrorCode.none, None)
    assert 1 not in controller.image.brokers


def test_controller_api_versions_reports_its_committed_images_features(controller: QuorumController) -> None:
    table = {controller_api_versions.API_KEY: controller_api_versions}
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    body = answer(Dispatcher(ControllerOnly(controller), table), request, 4)
    assert {f.name: f.max_version_level for f in body.finalized_features} == controller.image.features
    assert controller.image.features["metadata.version"] == 30
    assert body.finalized_features_epoch == controller.image.offset
    starting = answer(Dispatcher(ControllerOnly(controller, starting=True), table), request, 4)
    assert (starting.finalized_features, starting.finalized_features_epoch) == ((), -1)


@pytest.mark.parametrize(("request_", "version"), [
    (UnregisterBrokerRequest(broker_id=1), 0),
    (update_v1.UpdateFeaturesRequest(feature_updates=()), 1),
    (update_v2.UpdateFeaturesRequest(feature_updates=()), 2),
    (describe_quorum_v2.DescribeQuorumRequest(topics=()), 2),
], ids=["unregister_broker", "update_features_v1", "update_features_v2", "describe_quorum"])
def test_no_answer_from_the_controller_is_request_timed_out(request_: Any, version: int) -> None:
    async def unanswered(api_key: int, api_version: int, request: object) -> object | None:
        return None

    modules = (describe_quorum, update_features, unregister_broker)
    dispatcher = Dispatcher(SimpleNamespace(security=SecurityFeatures()), {m.API_KEY: m for m in modules}, unanswered)
    assert answer(dispatcher, request_, version).error_code == ErrorCode.request_timed_out
