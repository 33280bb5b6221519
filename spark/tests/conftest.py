"""Fixtures for the Spark acceptance scenarios: one SparkSession, and each scenario run twice,
once against Apache Kafka and once against kbroker (``broker``, parametrised).

The scenarios assert exact outcomes (values, offsets, batch sizes, error messages), so a
scenario passing on both targets means both gave the same result. ``broker`` is session-scoped
per target: all Kafka runs happen first, then Kafka is stopped and kbroker started, so only one
broker competes with Spark for the two cores at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kbroker.spark.connector import build_session
from pyspark.sql import SparkSession

from spark.tests.brokers import SparkBroker, start_target

# C1-only JIT for every Spark driver the scenarios start (this session's, and the pipeline drivers
# run as processes of their own): on two cores the C2 compilations of short jobs cost more than they
# save; a session starts and a small job runs about twice as fast. Both brokers face the same Spark.
SPARK_DRIVER_JVM = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session", autouse=True)
def spark_defaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A spark-defaults.conf for this session's drivers (SPARK_CONF_DIR is read by spark-submit)."""
    conf_dir = tmp_path_factory.mktemp("spark-conf")
    (conf_dir / "spark-defaults.conf").write_text(f"spark.driver.extraJavaOptions {SPARK_DRIVER_JVM}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_CONF_DIR", str(conf_dir))
        yield


@pytest.fixture(scope="session")
def spark(spark_defaults: None) -> Iterator[SparkSession]:
    session = build_session("kbroker-spark-acceptance", conf={"spark.sql.streaming.pollingDelay": "100ms"})
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session", params=["kafka", "kbroker"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkBroker]:
    workdir = tmp_path_factory.mktemp(f"spark-{request.param}")
    target = start_target(request.param, workdir / "broker")
    instance = SparkBroker(target, workdir)
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    """A fresh checkpoint directory for one streaming query."""
    return str(tmp_path / "checkpoint")
