"""The ``kbroker serve`` contract: defaults, exit status 2 on bad config, clean SIGTERM."""

from __future__ import annotations

import datetime
import logging
import os
import signal
import socket
import subprocess
import sys
import time

from confluent_kafka import Producer
from kio.schema.fetch.v12 import request as fetch
from kio.schema.fetch.v12 import response as fetch_response

from kbroker.cli import check_static_quorum, given_cluster_id
from kbroker.config.kafka_config import KafkaConfig
from tests.broker_process import BrokerProcess
from tests.kbroker.handlers.wire import read_response, request_frame


def run_cli(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_bad_config_exits_2_and_starts_nothing(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.dirs=./d\nnum.partitions=abc\n")
    result = run_cli("serve", "--config", str(props), cwd=str(tmp_path))
    assert result.returncode == 2
    assert ("Invalid value abc for configuration num.partitions: Not a number of type INT" in result.stderr
            and f"{props}:2" in result.stderr)
    assert not (tmp_path / "d").exists()


def test_serve_with_no_arguments_uses_localhost_9092_and_kbroker_data(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "kbroker", "serve"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "PLAINTEXT://localhost:9092" in line
        assert os.path.join(str(tmp_path), "kbroker-data") in line
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert (tmp_path / "kbroker-data" / "meta.properties").exists()


def test_sigterm_closes_cleanly_so_restart_needs_no_recovery(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"))
    broker.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("clean", value=b"%d" % i)
    assert producer.flush(30) == 0
    assert broker.stop() == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    broker.start()
    broker.stop()
    assert "not shut down cleanly" not in broker.read_log()


def _catches_sigterm(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        caught = next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def test_sigterm_as_soon_as_the_process_catches_it_stops_it_cleanly(tmp_path):
    """A SIGTERM during start-up (docker stop right after docker run) ends the process with status
    0: the launcher catches it before the half second of imports, so it is neither fatal nor — as
    a container's PID 1 — ignored until SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbroker", "serve", "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not _catches_sigterm(proc.pid):
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        proc.kill()


def test_the_launcher_catches_stop_signals_before_importing_the_broker():
    code = ("import signal, sys\n"
            "import kbroker.launcher\n"
            "early = kbroker.launcher.StopSignals().install()\n"
            "assert 'kbroker.cli' not in sys.modules and 'kbroker.node.broker' not in sys.modules\n"
            "signal.raise_signal(signal.SIGTERM)\n"
            "assert early.received == signal.SIGTERM\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _unread_bytes(local_port: int, remote_port: int) -> int | None:
    """Receive-queue length of the broker's end of a loopback connection (/proc/net/tcp)."""
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if local.endswith(f":{local_port:04X}") and remote.endswith(f":{remote_port:04X}"):
                return int(queues.split(":")[1], 16)
    return None


def test_sigterm_answers_the_request_in_flight(tmp_path):
    """A long-poll fetch parked when SIGTERM arrives still gets its (empty) response."""
    broker = BrokerProcess(str(tmp_path / "data"))
    broker.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("idle", value=b"x")
    assert producer.flush(30) == 0
    request = fetch.FetchRequest(
        max_wait=datetime.timedelta(seconds=5), min_bytes=1, topics=(fetch.FetchTopic(
            topic="idle", partitions=(fetch.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1024),),
        ),), forgotten_topics_data=(),
    )
    with socket.create_connection(("127.0.0.1", broker.port), timeout=15) as sock:
        sock.sendall(request_frame(request, 12, correlation_id=5))
        own_port = sock.getsockname()[1]
        deadline = time.monotonic() + 10
        # Wait until the broker has read the request off the socket: it is then in flight.
        while _unread_bytes(broker.port, own_port) != 0:
            assert time.monotonic() < deadline, "broker never read the request"
        started = time.monotonic()
        assert broker.stop() == 0
        response = read_response(sock, fetch_response.FetchResponse, correlation_id=5)
    (partition,) = response.responses[0].partitions
    assert (partition.error_code, partition.high_watermark) == (0, 1)
    assert time.monotonic() - started < 10


def test_a_dynamic_quorum_is_refused_naming_the_key_and_the_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.dirs=./d\nprocess.roles=broker,controller\nnode.id=1\n"
                     "controller.quorum.bootstrap.servers=127.0.0.1:9093\n")
    result = run_cli("serve", "--config", str(props), cwd=str(tmp_path))
    assert result.returncode == 2
    assert f"controller.quorum.bootstrap.servers (from {props}:4)" in result.stderr
    assert "set controller.quorum.voters" in result.stderr
    assert not (tmp_path / "d").exists()  # nothing started, not even as a quorum of itself


def test_quorum_bootstrap_servers_beside_static_voters_are_logged_as_not_acted_on(caplog):
    config = KafkaConfig.load(None, ["controller.quorum.voters=1@127.0.0.1:9093",
                                     "controller.quorum.bootstrap.servers=127.0.0.1:9093"])
    with caplog.at_level(logging.WARNING, logger="kbroker"):
        check_static_quorum(config)
    assert [r.getMessage() for r in caplog.records] == [
        "controller.quorum.bootstrap.servers (from --override) is not acted on: the quorum is "
        "controller.quorum.voters (static; kbroker has no dynamic quorum)"]


def test_the_cluster_id_comes_from_the_option_then_kafka_cluster_id_then_cluster_id():
    env = {"CLUSTER_ID": "from-cluster-id", "KAFKA_CLUSTER_ID": "from-kafka-cluster-id"}
    assert given_cluster_id("from-option", env) == ("from-option", "--cluster-id")
    assert given_cluster_id(None, env) == ("from-kafka-cluster-id", "KAFKA_CLUSTER_ID")
    assert given_cluster_id(None, {"CLUSTER_ID": "from-cluster-id"}) == ("from-cluster-id", "CLUSTER_ID")
    assert given_cluster_id(None, {"CLUSTER_ID": "  "}) == ("", "")


def test_a_bad_cluster_id_exits_2(tmp_path):
    result = run_cli("serve", "--override", "log.dirs=./d", "--cluster-id", "", cwd=str(tmp_path))
    assert result.returncode == 2
    assert "--cluster-id: the cluster id is empty" in result.stderr
