"""The ``kbroker serve`` contract: defaults, exit status 2 on bad config, clean SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys

from confluent_kafka import Producer

from tests.broker_process import BrokerProcess


def run_cli(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_bad_config_exits_2_and_starts_nothing(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.dirs=./d\nnot.a.kafka.key=1\n")
    result = run_cli("serve", "--config", str(props), cwd=str(tmp_path))
    assert result.returncode == 2
    assert "not.a.kafka.key" in result.stderr and f"{props}:2" in result.stderr
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
