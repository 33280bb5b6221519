"""Spark's Kafka connector on this machine: its jars, and SparkSessions that load them.

The connector (``spark-sql-kafka-0-10_2.13``) must match the PySpark version exactly. Users
normally let Spark fetch it with ``--packages`` / ``spark.jars.packages``; here the four jars
PySpark lacks are resolved once with Maven into ``~/.cache/kbroker/spark-<version>/jars`` (or
``$KBROKER_SPARK_JARS``) and passed as ``spark.jars``, a path that needs no Ivy set-up.
``python -m kbroker.spark.connector`` resolves them and prints the directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kbroker.spark.maven import MavenJars, cache_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_VERSION = "4.2.0"
CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"
POM = Path(__file__).resolve().with_name("connector-jars.pom.xml")
JARS_ENV = "KBROKER_SPARK_JARS"
# The connector's own jars; everything else it depends on is already in pyspark/jars.
ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2")


def connector_jars() -> MavenJars:
    return MavenJars(
        f"Spark {SPARK_VERSION} Kafka connector",
        POM,
        cache_dir(f"spark-{SPARK_VERSION}/jars", JARS_ENV),
        required=f"spark-sql-kafka-0-10_2.13-{SPARK_VERSION}",
        mvn_args=(f"-DincludeArtifactIds={','.join(ARTIFACTS)}",),
    )


def build_session(app_name: str, master: str = "local[2]", conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession with the connector on its classpath (the first session of the process
    decides the classpath, so call this before anything else starts Spark)."""
    import pyspark
    from pyspark.sql import SparkSession

    if pyspark.__version__ != SPARK_VERSION:
        raise RuntimeError(
            f"PySpark {pyspark.__version__} is installed but the connector jars are for {SPARK_VERSION}; "
            f"install pyspark=={SPARK_VERSION} (pip install 'kbroker[spark]')"
        )
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars", ",".join(str(j) for j in connector_jars().jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


if __name__ == "__main__":
    print(connector_jars().ensure(), file=sys.stdout)
