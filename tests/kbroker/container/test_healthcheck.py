"""kbroker healthcheck: ready means answering ApiVersions and Metadata with this node among the
brokers and a controller, not an open port."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from kbroker.container.healthcheck import NotReady, Probe, check_ready
from kbroker.testing.ports import free_port
from tests.broker_process import BrokerProcess


def test_a_running_node_is_ready(broker: BrokerProcess) -> None:
    assert check_ready(Probe("127.0.0.1", broker.port, "broker", 1)) == "ready: brokers [1], controller 1"


def test_another_node_id_is_not_ready(broker: BrokerProcess) -> None:
    with pytest.raises(NotReady, match="node 7 is not among the brokers"):
        check_ready(Probe("127.0.0.1", broker.port, "broker", 7))


def test_an_open_port_that_does_not_answer_is_not_ready() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with pytest.raises(NotReady):
            check_ready(Probe("127.0.0.1", listener.getsockname()[1]), timeout=0.5)


def test_the_command_exits_0_when_ready_and_1_otherwise(broker: BrokerProcess) -> None:
    def healthcheck(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kbroker", "healthcheck", *args],
                              capture_output=True, text=True, timeout=60)

    ready = healthcheck("--bootstrap-server", broker.bootstrap, "--node-id", "1")
    assert (ready.returncode, ready.stdout.strip()) == (0, "ready: brokers [1], controller 1")
    refused = healthcheck("--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert refused.returncode == 1 and refused.stderr.startswith("not ready:")
