"""PySpark over segment files in Kafka's on-disk format (`pip install 'brook-broker[spark]'`).

    from brook.spark import register
    register(spark)
    df = spark.read.format("kafka-segments").load("/var/lib/kafka/data")

Imports brook.storage, brook.protocol, pyspark and pyarrow, never the broker: the module
must be importable by Spark's Python workers.
"""

from __future__ import annotations

from typing import Any

from .data_source import NAME, KafkaSegmentsDataSource

__all__ = ["NAME", "KafkaSegmentsDataSource", "register"]


def register(spark: Any) -> None:
    """Register the `kafka-segments` data source with a SparkSession."""
    spark.dataSource.register(KafkaSegmentsDataSource)
