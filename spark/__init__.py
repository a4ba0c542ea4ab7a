"""PySpark over segment files in Kafka's on-disk format (`pip install 'brook-broker[spark]'`).

    from brook.spark import register
    register(spark)
    df = spark.read.format("kafka-segments").load("/var/lib/kafka/data")

Imports brook.storage, brook.protocol, pyspark and pyarrow, never the broker: the module
must be importable by Spark's Python workers.
"""

from __future__ import annotations

import logging
import os
from typing import Any

if os.environ.get("SPARK_PYTHON_RUNTIME") == "PYTHON_WORKER":
    # In one of Spark's Python workers, which draw no hypothesis examples: kio's types
    # without their strategies (brook/protocol/kio_loading.py says why).
    from brook.protocol import kio_loading  # noqa: F401

# isort: split

from pyspark.errors import PySparkException

from .data_source import NAME, KafkaSegmentsDataSource, KafkaSegmentsDataSourceNoPushdown

__all__ = ["FILTER_PUSHDOWN", "NAME", "KafkaSegmentsDataSource", "register"]

FILTER_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"  # off by default in Spark 4.1
log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the `kafka-segments` data source with a SparkSession, and turn on filter
    pushdown for Python data sources in it so that filters on topic, partition, offset
    and timestamp narrow what is read. Where the session refuses the setting, the source
    is registered without pushdown (Spark then filters every row read)."""
    try:
        spark.conf.set(FILTER_PUSHDOWN, "true")
        pushdown = str(spark.conf.get(FILTER_PUSHDOWN)).lower() == "true"
    except PySparkException as exc:
        log.warning(
            "%s: %s cannot be set (%s): filters are not pushed down", NAME, FILTER_PUSHDOWN, exc
        )
        pushdown = False
    spark.dataSource.register(
        KafkaSegmentsDataSource if pushdown else KafkaSegmentsDataSourceNoPushdown
    )
