"""``kbroker healthcheck``: is this node ready for clients? (the image's HEALTHCHECK)

An open port is not enough: a cluster broker listens before its controller has registered and
unfenced it, and clients sent there get no partitions. Ready means, for a node with the broker
role, that it answers ApiVersions and a Metadata request that lists this node among the brokers
and names a controller; for a controller-only node, that it answers ApiVersions and
DescribeQuorum with a known quorum leader. One blocking connection, no retries: the caller
(the container engine, or :func:`wait_ready`) decides how often to ask.

Without ``--bootstrap-server`` the node is the one the container runs: its settings are read
from the ``server.properties`` the entrypoint wrote (``kbroker.container.entrypoint``), and the
first listener of its role is dialled on loopback when it binds a wildcard address.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.describe_quorum.v1 import request as describe_quorum_v1
from kio.schema.metadata.v12 import request as metadata_v12

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.container.container_config import FINAL_PROPERTIES
from kbroker.protocol.codec import decode_response, encode_request

API_VERSIONS, METADATA, DESCRIBE_QUORUM = 18, 3, 55
METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "kbroker-healthcheck"
DEFAULT_TIMEOUT_S = 3.0
_INT32 = struct.Struct(">i")
_correlation_ids = itertools.count(1)


class NotReady(Exception):
    """The node answered (or failed to) in a way that means clients cannot use it yet."""


@dataclass(frozen=True)
class Probe:
    """Where to ask and what to ask: ``role`` is "broker" (Metadata) or "controller" (DescribeQuorum);
    ``node_id`` None accepts any node as long as the answer is otherwise ready."""

    host: str
    port: int
    role: str = "broker"
    node_id: int | None = None


def check_ready(probe: Probe, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """One readiness check; returns a one-line description, raises :class:`NotReady` otherwise."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((probe.host, probe.port), timeout=timeout) as sock:
            versions = call(sock, API_VERSIONS, 3, api_versions_v3.ApiVersionsRequest(
                client_software_name=CLIENT_ID, client_software_version="1"), deadline)
            if versions.error_code != 0:
                raise NotReady(f"ApiVersions answered error {versions.error_code}")
            if probe.role == "controller":
                return _quorum_ready(sock, probe, deadline)
            return _broker_ready(sock, probe, deadline)
    except (OSError, EOFError) as exc:
        raise NotReady(f"{probe.host}:{probe.port}: {exc}") from None


def _broker_ready(sock: socket.socket, probe: Probe, deadline: float) -> str:
    answer = call(sock, METADATA, 12, metadata_v12.MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False), deadline)
    brokers = sorted(int(b.node_id) for b in answer.brokers)
    if probe.node_id is not None and probe.node_id not in brokers:
        raise NotReady(f"node {probe.node_id} is not among the brokers yet (Metadata lists {brokers})")
    if not brokers:
        raise NotReady("Metadata lists no broker yet")
    if answer.controller_id < 0:
        raise NotReady("no controller known yet")
    return f"ready: brokers {brokers}, controller {answer.controller_id}"


def _quorum_ready(sock: socket.socket, probe: Probe, deadline: float) -> str:
    request = describe_quorum_v1.DescribeQuorumRequest(topics=(describe_quorum_v1.TopicData(
        topic_name=METADATA_TOPIC, partitions=(describe_quorum_v1.PartitionData(partition_index=0),)),))
    answer = call(sock, DESCRIBE_QUORUM, 1, request, deadline)
    if answer.error_code != 0:
        raise NotReady(f"DescribeQuorum answered error {answer.error_code}")
    partition = answer.topics[0].partitions[0]
    if partition.error_code != 0 or partition.leader_id < 0:
        raise NotReady(f"no quorum leader yet (error {partition.error_code})")
    return f"ready: quorum leader {partition.leader_id}, epoch {partition.leader_epoch}"


def call(sock: socket.socket, api_key: int, version: int, body: object, deadline: float) -> Any:
    """One request and its decoded answer on a blocking socket, by ``deadline`` (monotonic)."""
    correlation_id = next(_correlation_ids)
    sock.sendall(encode_request(api_key, version, correlation_id, CLIENT_ID, body))
    (size,) = _INT32.unpack(read_exact(sock, 4, deadline))
    answered_id, value = decode_response(api_key, version, read_exact(sock, size, deadline))
    if answered_id != correlation_id:
        raise NotReady(f"answer to correlation id {answered_id}, expected {correlation_id}")
    return value


def read_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    out = bytearray()
    while len(out) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete answer in time")
        sock.settimeout(remaining)
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise EOFError("connection closed")
        out += chunk
    return bytes(out)


def wait_ready(probe: Probe, timeout: float, interval: float = 0.05, alive: Callable[[], bool] | None = None) -> str:
    """Ask until ready or ``timeout``; ``alive`` (a callable) stops early when it returns False."""
    deadline = time.monotonic() + timeout
    last = "not asked yet"
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise NotReady(f"the node exited before it was ready (last answer: {last})")
        try:
            return check_ready(probe, timeout=min(DEFAULT_TIMEOUT_S, max(0.1, deadline - time.monotonic())))
        except NotReady as exc:
            last = str(exc)
        time.sleep(interval)
    raise NotReady(f"not ready within {timeout:.0f} s: {last}")


def probe_for_config(config: KafkaConfig) -> Probe:
    """The probe for a node from its settings: its first listener of the role clients (or, for a
    controller-only node, voters) use; a wildcard bind address is dialled on loopback."""
    controller_names = config.controller_listener_names
    role = "broker" if "broker" in config.process_roles else "controller"
    wanted = [(n, h, p) for n, h, p in config.listeners if (n in controller_names) == (role == "controller")]
    if not wanted:
        raise ConfigError(f"no {role} listener in listeners={config.get('listeners')}")
    _name, host, port = wanted[0]
    return Probe(host if host not in ("", "0.0.0.0", "::") else "127.0.0.1", port, role, config.node_id)


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The ``healthcheck`` subcommand's arguments."""
    parser = commands.add_parser("healthcheck", help="exit 0 when a node is ready for clients, 1 otherwise")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="ask this address instead of the node configured by --config")
    parser.add_argument("--node-id", type=int, help="with --bootstrap-server: require this node among the brokers")
    parser.add_argument("--controller", action="store_true",
                        help="with --bootstrap-server: the address is a controller listener (DescribeQuorum)")
    parser.add_argument("--config", default=FINAL_PROPERTIES,
                        help="the node's server.properties (default: the one the container entrypoint wrote)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds for the whole check")


def main(args: argparse.Namespace) -> int:
    """Run one check for ``kbroker healthcheck``; prints the outcome, exit status 0 when ready."""
    try:
        if args.bootstrap_server:
            host, _colon, port = args.bootstrap_server.rpartition(":")
            probe = Probe(host or "127.0.0.1", int(port), "controller" if args.controller else "broker", args.node_id)
        else:
            probe = probe_for_config(KafkaConfig.load(args.config if os.path.exists(args.config) else None))
        print(check_ready(probe, args.timeout))
        return 0
    except (NotReady, ConfigError, ValueError) as exc:
        print(f"not ready: {exc}", file=sys.stderr)
        return 1
