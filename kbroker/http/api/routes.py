"""The ``/api/...`` routes of the console: JSON reads, and the write actions behind
``kbroker.http.console.write.enable``.

Reads need the node's broker role (a controller-only node answers 404 with why). Writes — create
a topic, reset an inactive group's offsets — are refused with 403 unless
``kbroker.http.console.write.enable=true``. The HTTP listener has no authentication, so an HTTP
caller is ``User:ANONYMOUS`` from its address, as an unauthenticated PLAINTEXT client is: with
an authorizer configured a write needs the ACLs that principal would need over the Kafka
protocol (CreateTopics: CREATE on the cluster or the topic; OffsetCommit: READ on the group and
the topic).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kbroker.groups.offset_store import OffsetAndMetadata
from kbroker.http.api import cluster_view, groups_view, messages, remote_messages
from kbroker.http.api.throughput import ThroughputSampler
from kbroker.http.api.timeline import ReplicationTimeline
from kbroker.http.app import SERVICES_KEY
from kbroker.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.protocol.errors import KafkaError
from kbroker.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

WRITE_ENABLE_KEY = "kbroker.http.console.write.enable"
TIMELINE_KEY: web.AppKey[dict[int, ReplicationTimeline]] = web.AppKey("kbroker.console.timeline")
THROUGHPUT_KEY: web.AppKey[dict[int, ThroughputSampler]] = web.AppKey("kbroker.console.throughput")

RESET_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _broker(request: web.Request) -> Broker:
    broker = request.app[SERVICES_KEY].broker
    if broker is None or broker.lifecycle is None:
        raise web.HTTPNotFound(text="this node has no broker role (or it has not joined its cluster yet)")
    return broker


def _int(request: web.Request, name: str, default: int | None = None) -> int:
    raw = request.query.get(name, request.match_info.get(name))
    if raw is None or raw == "":
        if default is None:
            raise web.HTTPBadRequest(text=f"{name} is required")
        return default
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer, got {raw!r}") from None


async def _console(request: web.Request) -> web.Response:
    services = request.app[SERVICES_KEY]
    return web.json_response({"write_enabled": services.config.get_bool(WRITE_ENABLE_KEY),
                              "node_id": services.config.node_id})


async def _cluster(request: web.Request) -> web.Response:
    return web.json_response(cluster_view.brokers(_broker(request)))


async def _topics(request: web.Request) -> web.Response:
    return web.json_response(cluster_view.topics(_broker(request)))


async def _topic(request: web.Request) -> web.Response:
    found = cluster_view.topic(_broker(request), request.match_info["topic"])
    if found is None:
        raise web.HTTPNotFound(text=f"no topic {request.match_info['topic']}")
    return web.json_response(found)


async def _messages(request: web.Request) -> web.Response:
    broker = _broker(request)
    topic, index = request.match_info["topic"], _int(request, "partition")
    partition = broker.replica_manager.partitions.get((topic, index))
    read_committed = request.query.get("isolation") == "read_committed"
    if partition is None:  # read from the leader over the Kafka protocol
        timestamp = _int(request, "timestamp") if "timestamp" in request.query else None
        offset = _int(request, "offset") if "offset" in request.query and timestamp is None else None
        try:
            return web.json_response(await remote_messages.read(
                broker, topic, index, offset, timestamp, _int(request, "max", 20), read_committed))
        except remote_messages.NoLeader as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        except KafkaError as exc:
            raise web.HTTPBadRequest(text=f"{exc.code.name.upper()}: {exc}") from None
        except (ConnectionError, TimeoutError, OSError) as exc:
            raise web.HTTPBadGateway(text=f"reading {topic}-{index} from its leader: {exc}") from None
    if "timestamp" in request.query:
        offset = messages.start_offset_for_timestamp(partition, _int(request, "timestamp"))
    else:
        offset = _int(request, "offset", partition.log_start_offset)
    try:
        return web.json_response(messages.read(partition, offset, _int(request, "max", 20), read_committed))
    except KafkaError as exc:
        raise web.HTTPBadRequest(text=f"{exc.code.name.upper()}: {exc}") from None


async def _timeline(request: web.Request) -> web.Response:
    broker = _broker(request)
    timelines = request.app[TIMELINE_KEY]
    timeline = timelines.setdefault(broker.node_id, ReplicationTimeline(broker))
    try:
        return web.json_response(await timeline.of_partition(request.match_info["topic"],
                                                             _int(request, "partition")))
    except (ConnectionError, TimeoutError) as exc:
        raise web.HTTPServiceUnavailable(text=f"the metadata log could not be read: {exc}") from None


async def _groups(request: web.Request) -> web.Response:
    return web.json_response(await groups_view.groups(_broker(request)))


async def _group(request: web.Request) -> web.Response:
    try:
        found = await groups_view.group(_broker(request), request.match_info["group"])
    except KafkaError as exc:  # its coordinator, another broker, could not be asked
        raise web.HTTPServiceUnavailable(text=f"{exc.code.name.upper()}: {exc}") from None
    if found is None:
        raise web.HTTPNotFound(text=f"no group {request.match_info['group']}")
    return web.json_response(found)


async def _throughput(request: web.Request) -> web.Response:
    broker = _broker(request)
    sampler = request.app[THROUGHPUT_KEY].setdefault(broker.node_id, ThroughputSampler(broker))
    return web.json_response(sampler.series())


async def _clients(request: web.Request) -> web.Response:
    return web.json_response(cluster_view.clients(_broker(request)))


def _check_write(request: web.Request, broker: Broker, *needed: tuple[int, int, str]) -> None:
    """403 unless writes are on and (with an authorizer) ``User:ANONYMOUS`` from the caller's
    address is allowed some (operation, resource type, name) of ``needed``."""
    if not request.app[SERVICES_KEY].config.get_bool(WRITE_ENABLE_KEY):
        raise web.HTTPForbidden(text=f"the console is read-only ({WRITE_ENABLE_KEY}=false)")
    authorizer = broker.services.security.authorizer
    host = request.remote or ""
    if authorizer is not None and not any(authorizer.authorize(ANONYMOUS, host, operation, resource_type, name)
                                          for operation, resource_type, name in needed):
        raise web.HTTPForbidden(text=f"{ANONYMOUS} is not allowed to do that (ACLs)")


async def _create_topic(request: web.Request) -> web.Response:
    broker = _broker(request)
    body: dict[str, Any] = await request.json()
    name = str(body.get("name", ""))
    # As CreateTopics: CREATE on the cluster or on the topic.
    _check_write(request, broker, (AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
                 (AclOperation.CREATE, ResourceType.TOPIC, name))
    try:
        info = await broker.controller.create_topic(
            name, int(body.get("partitions", -1)), int(body.get("replication_factor", -1)),
            {str(k): str(v) for k, v in dict(body.get("configs", {})).items()})
    except KafkaError as exc:
        return web.json_response({"error": exc.code.name.upper(), "message": str(exc)}, status=400)
    return web.json_response({"name": name, "partitions": info.partitions}, status=201)


async def _reset_offsets(request: web.Request) -> web.Response:
    """kafka-consumer-groups --reset-offsets for one topic of an inactive group: ``to`` is
    "earliest", "latest" or an offset (clamped to the log's range), for ``partitions`` (default:
    every partition this broker holds). Committed as AdminClient.alterConsumerGroupOffsets
    commits (generation -1, no member), through the coordinator's own checks."""
    broker = _broker(request)
    group_id = request.match_info["group"]
    body: dict[str, Any] = await request.json()
    topic, to = str(body.get("topic", "")), str(body.get("to", "earliest"))
    # As OffsetCommit: READ on the group and on the topic.
    _check_write(request, broker, (AclOperation.READ, ResourceType.GROUP, group_id))
    _check_write(request, broker, (AclOperation.READ, ResourceType.TOPIC, topic))
    state = await groups_view.group(broker, group_id)
    if state is not None and state["coordinator"] != broker.node_id:
        raise web.HTTPConflict(text=f"group {group_id} is coordinated by broker {state['coordinator']}: "
                                    "reset its offsets in that broker's console")
    if state is not None and state["members"]:
        raise web.HTTPConflict(text=f"group {group_id} is {state['state']}: offsets can only be reset "
                                    "while it has no members")
    wanted = body.get("partitions") or sorted(i for t, i in broker.replica_manager.partitions if t == topic)
    now_ms = broker.clock.wall_ms()
    offsets = {}
    for index in wanted:
        partition = broker.replica_manager.partitions.get((topic, int(index)))
        if partition is None:
            raise web.HTTPNotFound(text=f"broker {broker.node_id} holds no replica of {topic}-{index}")
        low, high = partition.log_start_offset, partition.high_watermark
        target = low if to == "earliest" else high if to == "latest" else min(max(int(to), low), high)
        offsets[(topic, int(index))] = OffsetAndMetadata(target, -1, "", now_ms, partition.topic_id)
    try:
        broker.group_coordinator.validate_commit(group_id, -1, "", None, api_version=9)
        broker.group_coordinator.commit(group_id, offsets)
        error = await broker.offset_store.wait_replicated(group_id, RESET_TIMEOUT_MS)
    except KafkaError as exc:
        error = exc.code
    if error:
        return web.json_response({"error": error.name.upper()}, status=409)
    return web.json_response({"group_id": group_id, "offsets": [
        {"topic": t, "partition": i, "offset": o.offset} for (t, i), o in sorted(offsets.items())]})


def register(app: web.Application) -> None:
    app[TIMELINE_KEY] = {}
    app[THROUGHPUT_KEY] = {}
    routes: list[tuple[str, str, Handler]] = [
        ("GET", "/api/console", _console),
        ("GET", "/api/cluster", _cluster),
        ("GET", "/api/topics", _topics),
        ("POST", "/api/topics", _create_topic),
        ("GET", "/api/topics/{topic}", _topic),
        ("GET", "/api/topics/{topic}/partitions/{partition}/messages", _messages),
        ("GET", "/api/topics/{topic}/partitions/{partition}/timeline", _timeline),
        ("GET", "/api/groups", _groups),
        ("GET", "/api/groups/{group}", _group),
        ("POST", "/api/groups/{group}/offsets", _reset_offsets),
        ("GET", "/api/throughput", _throughput),
        ("GET", "/api/clients", _clients),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
