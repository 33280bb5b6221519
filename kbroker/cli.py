"""Command line: ``kbroker serve [--config server.properties] [--override key=value ...]``, and
``kbroker container`` (the image's entrypoint) and ``kbroker healthcheck`` (its HEALTHCHECK).

Exit status 2 for a bad configuration (the message names the key and where it came from);
SIGTERM/SIGINT shut down cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.container import entrypoint as container_entrypoint
from kbroker.container import healthcheck
from kbroker.network.rate_limited_log import RateLimitedLogger, rate_limit_loop_errors
from kbroker.node.broker import Broker
from kbroker.node.controller_node import ControllerNode
from kbroker.node.meta_properties import init_log_dirs
from kbroker.node.open_file_limit import raise_open_file_limit


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
    commands.add_parser("container", help="run a node configured from KAFKA_* variables (the image's entrypoint)")
    healthcheck.add_parser(commands)
    return parser


async def _serve(config: KafkaConfig, stop_requested: Callable[[], bool]) -> None:
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
    try:
        if "controller" in config.process_roles:
            # Only a quorum's sole voter invents its cluster id; several voters take the one
            # the first active controller writes into the metadata log.
            sole_voter = [node for node, _host, _port in config.quorum_voters] == [config.node_id]
            cluster_id = init_log_dirs(config.log_dirs, config.node_id, invent_cluster_id=sole_voter)
            controller = ControllerNode(config, cluster_id)
            if not await _started(controller.start(), stop):
                return
            bound += controller.bound
        if "broker" in config.process_roles:
            broker = Broker(config, local_controller=controller)
            # A broker waits for its controller to unfence it; a SIGTERM meanwhile stops it.
            if not await _started(broker.start(), stop):
                return
            bound += broker.bound
        listens = ", ".join(f"{n}://{h or '0.0.0.0'}:{p}" for n, h, p in bound)
        print(f"kbroker node {config.node_id} listening on {listens}; data in {', '.join(config.log_dirs)}",
              flush=True)
        ignored = config.ignored_keys()
        if ignored:
            logging.getLogger("kbroker").info("accepted but not acted on: %s", ", ".join(ignored))
        await stop.wait()
    finally:
        if broker is not None:
            await broker.stop()
        if controller is not None:
            await controller.stop()


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
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = KafkaConfig.load(args.config, args.override)
    except ConfigError as exc:
        print(f"kbroker: configuration error: {exc}", file=sys.stderr)
        return 2
    raise_open_file_limit()
    try:
        asyncio.run(_serve(config, stop_requested))
    except (OSError, RuntimeError) as exc:  # port in use, unreadable log dir, foreign meta.properties
        print(f"kbroker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0
