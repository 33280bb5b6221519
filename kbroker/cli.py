"""Command line: ``kbroker serve [--config server.properties] [--override key=value ...]
[--cluster-id ID] [--add-scram 'SCRAM-SHA-256=[name=alice,password=...]' ...]``, and
``kbroker container`` (the image's entrypoint) and ``kbroker healthcheck`` (its HEALTHCHECK).

Exit status 2 for a bad configuration (the message names the key and where it came from), 1 when
the node cannot start on its log dirs (another node's or another cluster's data, a port in use);
SIGTERM/SIGINT shut down cleanly. The cluster id comes from ``--cluster-id``, else the
``KAFKA_CLUSTER_ID`` or ``CLUSTER_ID`` environment variable (the names images of Kafka use), else
from the log dirs' meta.properties, else from the metadata log (see kbroker/node/meta_properties.py).
``--add-scram`` users are written by a new cluster's first active controller with its first
records, as ``kafka-storage format --add-scram`` writes them; on an existing cluster they are
ignored, as the format that wrote them happens once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.container import entrypoint as container_entrypoint
from kbroker.container import healthcheck
from kbroker.handlers import TELEMETRY_HANDLERS
from kbroker.http.app import NodeServices
from kbroker.http.server import HttpServer
from kbroker.log_format import TEXT_FORMAT, use_format
from kbroker.metrics.client_telemetry import CLIENT_TELEMETRY
from kbroker.network.dispatcher import Dispatcher
from kbroker.network.rate_limited_log import RateLimitedLogger, rate_limit_loop_errors
from kbroker.network.request_logger import RequestLogger
from kbroker.node.broker import Broker
from kbroker.node.controller_node import ControllerNode
from kbroker.node.meta_properties import ClusterIdentityError, check_cluster_id, init_log_dirs
from kbroker.node.open_file_limit import raise_open_file_limit
from kbroker.replication.quorum.metadata_records import UserScramCredentialRecord
from kbroker.security.sasl.scram_seeding import parse_add_scram

# The environment variables that name the cluster id, first wins (apache/kafka's image reads CLUSTER_ID).
CLUSTER_ID_VARIABLES = ("KAFKA_CLUSTER_ID", "CLUSTER_ID")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbroker", description="Kafka-compatible broker")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker node")
    serve.add_argument("--config", help="Kafka-style server.properties file")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="set a config key (wins over the file); repeatable",
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    serve.add_argument(
        "--cluster-id", help=f"the cluster this node belongs to (as kafka-storage format -t); default "
                             f"${' or $'.join(CLUSTER_ID_VARIABLES)}, else what the log dirs or the metadata log hold",
    )
    serve.add_argument(
        "--add-scram", action="append", default=[], metavar="MECHANISM=[name=...,password=...]",
        help="a SCRAM user written when a new cluster starts, as kafka-storage format --add-scram; repeatable",
    )
    commands.add_parser("container", help="run a node configured from KAFKA_* variables (the image's entrypoint)")
    healthcheck.add_parser(commands)
    return parser


def given_cluster_id(argument: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """(cluster id, where it came from) as given at start; ("", "") when none was."""
    if argument is not None:
        return check_cluster_id(argument, "--cluster-id"), "--cluster-id"
    for name in CLUSTER_ID_VARIABLES:
        if environ.get(name, "").strip():
            return check_cluster_id(environ[name], name), name
    return "", ""


def check_static_quorum(config: KafkaConfig) -> None:
    """Refuse a dynamic quorum (KIP-853): kbroker has only Kafka's static one. A node given only
    controller.quorum.bootstrap.servers would otherwise start as a quorum of itself alone."""
    if not config.get("controller.quorum.bootstrap.servers"):
        return
    source = config.sources["controller.quorum.bootstrap.servers"]
    if "controller.quorum.voters" not in config.explicit:
        raise ConfigError(
            f"controller.quorum.bootstrap.servers (from {source}) asks for a dynamic controller quorum (KIP-853), "
            "which kbroker does not have: set controller.quorum.voters (a static quorum, "
            "id@host:port,...) instead"
        )
    logging.getLogger("kbroker").warning(
        "controller.quorum.bootstrap.servers (from %s) is not acted on: the quorum is controller.quorum.voters "
        "(static; kbroker has no dynamic quorum)", source)


async def _serve(config: KafkaConfig, stop_requested: Callable[[], bool], cluster_id: str = "",
                 cluster_id_origin: str = "", refusals: list[str] | None = None,
                 scram_users: Sequence[UserScramCredentialRecord] = ()) -> None:
    """Run the node until a stop signal, or until its controller finds it belongs to another
    cluster (the reason is appended to ``refusals``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if stop_requested():
        stop.set()  # it came while the process was starting (kbroker/launcher.py)
    rate_limit_loop_errors(loop, RateLimitedLogger(logging.getLogger("asyncio")))
    controller: ControllerNode | None = None
    broker: Broker | None = None
    bound: list[tuple[str, str, int]] = []
    # Started first so /health/live answers while the roles start; the roles join as they are built.
    services = NodeServices(config)
    http = HttpServer(services)
    try:
        await http.start()
        # Only a quorum's sole voter invents its cluster id; several voters take the one the
        # first active controller writes into the metadata log, and a broker learns it there.
        sole_voter = ("controller" in config.process_roles
                      and [node for node, _host, _port in config.quorum_voters] == [config.node_id])
        cluster_id = init_log_dirs(_meta_dirs(config), config.node_id, sole_voter, cluster_id, cluster_id_origin)
        if "controller" in config.process_roles:
            def refuse(reason: str) -> None:
                if refusals is not None and not refusals:
                    refusals.append(reason)
                stop.set()

            controller = ControllerNode(config, cluster_id, on_inconsistent_cluster=refuse,
                                        bootstrap_records=scram_users)
            services.controller = controller
            _observe_requests(controller.dispatcher, services, config)
            if not await _started(controller.start(), stop):
                return
            bound += controller.bound
        if "broker" in config.process_roles:
            broker = Broker(config, local_controller=controller)
            services.broker = broker
            _observe_requests(broker.dispatcher, services, config)
            if services.metrics is not None:  # KIP-714: clients push, /metrics shows it
                broker.dispatcher.handlers = {**broker.dispatcher.handlers, **TELEMETRY_HANDLERS}
                # Subscriptions match on the software each connection named in ApiVersions.
                CLIENT_TELEMETRY.connected = broker.dispatcher.clients
                CLIENT_TELEMETRY.max_bytes = config.get_int("telemetry.max.bytes")
            # A broker waits for its controller to unfence it; a SIGTERM meanwhile stops it.
            if not await _started(broker.start(), stop):
                return
            bound += broker.bound
        listens = ", ".join([f"{n}://{h or '0.0.0.0'}:{p}" for n, h, p in bound]
                            + [f"http://{h}:{p}" for h, p in http.bound])
        print(f"kbroker node {config.node_id} listening on {listens}; data in {', '.join(config.log_dirs)}",
              flush=True)
        ignored = config.ignored_keys()
        if ignored:
            logging.getLogger("kbroker").info("accepted, not acted on yet: %s", ", ".join(ignored))
        unknown = config.unknown_keys()
        if unknown:
            logging.getLogger("kbroker").warning("not Kafka configuration keys, ignored: %s", ", ".join(unknown))
        await stop.wait()
    finally:
        if broker is not None:
            await broker.stop()
        if controller is not None:
            await controller.stop()
        await http.stop()


def _observe_requests(dispatcher: Dispatcher[Any], services: NodeServices, config: KafkaConfig) -> None:
    """Hand the node's answered requests to the request metrics (when /metrics is served) and
    to the kbroker.request logger."""
    observers = [RequestLogger(config.get_int("kbroker.request.logger.slow.ms")).completed]
    if services.metrics is not None:
        observers.append(services.metrics.requests.completed)
    if len(observers) == 1:
        dispatcher.observer = observers[0]
        return

    def observe(*args: Any) -> None:
        for observer in observers:
            observer(*args)
    dispatcher.observer = observe


def _meta_dirs(config: KafkaConfig) -> list[str]:
    """The dirs that carry meta.properties: log.dirs and, if apart, metadata.log.dir (as Kafka's)."""
    dirs = list(config.log_dirs)
    metadata_dir = config.get("metadata.log.dir")
    if metadata_dir and os.path.abspath(metadata_dir) not in dirs:
        dirs.append(os.path.abspath(metadata_dir))
    return dirs


async def _started(start: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run a node's start-up unless a stop signal comes first (then it is cancelled)."""
    starting = asyncio.ensure_future(start)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if starting.done():
        starting.result()  # start-up errors surface here
        return True
    starting.cancel()
    logging.getLogger("kbroker").info("stopped during start-up")
    return False


def main(argv: list[str] | None = None, stop_requested: Callable[[], bool] = lambda: False) -> int:
    """Run the command; ``stop_requested`` tells whether a stop signal came before the event
    loop had its own handlers (kbroker/launcher.py)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "healthcheck":
        return healthcheck.main(args)
    if args.command == "container":
        try:
            args = parser.parse_args(container_entrypoint.serve_argv(os.environ))
        except ConfigError as exc:
            print(f"kbroker: configuration error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # the data volume is not writable by the image's user
            print(f"kbroker: cannot start: {exc}", file=sys.stderr)
            return 1
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format=TEXT_FORMAT)
    try:
        config = KafkaConfig.load(args.config, args.override)
        use_format(config.get("kbroker.log.format") or "text")
        check_static_quorum(config)
        cluster_id, cluster_id_origin = given_cluster_id(args.cluster_id, os.environ)
        scram_users = [parse_add_scram(argument) for argument in args.add_scram]
    except (ConfigError, ClusterIdentityError) as exc:
        print(f"kbroker: configuration error: {exc}", file=sys.stderr)
        return 2
    raise_open_file_limit()
    refusals: list[str] = []
    try:
        asyncio.run(_serve(config, stop_requested, cluster_id, cluster_id_origin, refusals, scram_users))
    except ConfigError as exc:  # found while the listeners are built (a keystore that does not load)
        print(f"kbroker: configuration error: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:  # port in use, unreadable log dir, another node's or cluster's data
        print(f"kbroker: cannot start: {exc}", file=sys.stderr)
        return 1
    if refusals:  # the quorum does not take this node for one of its own
        print(f"kbroker: stopped: {refusals[0]}", file=sys.stderr)
        return 1
    return 0
