"""brook.spark runs in Spark's Python workers: it loads storage and protocol, never the
broker or a Kafka client."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import brook.spark
print(json.dumps(sorted(sys.modules)))
"""


def test_brook_spark_imports_nothing_of_the_broker():
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(ran.stdout)
    assert "brook.storage.reader" in loaded and "pyspark.sql.datasource" in loaded
    unwanted = [
        name
        for name in loaded
        if name.startswith(("brook.broker", "confluent_kafka", "kafka", "aiokafka"))
    ]
    assert unwanted == []


def test_a_spark_python_worker_loads_kio_without_hypothesis(spark):
    """Spark's Python workers (SPARK_PYTHON_RUNTIME=PYTHON_WORKER) import brook.spark with
    kio's types but not hypothesis, which kio would otherwise load and register strategies
    with (0.3 CPU-s a worker); a driver's process keeps kio's strategies."""

    def probe(_: object) -> object:
        import os
        import sys

        import brook.spark.data_source  # noqa: F401

        phantom = sys.modules["kio.static._phantom"]
        yield (
            os.environ.get("SPARK_PYTHON_RUNTIME"),
            phantom.hypothesis is None,
            "hypothesis.core" in sys.modules,
        )

    assert spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect() == [
        ("PYTHON_WORKER", True, False)
    ]
    driver = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert "hypothesis.core" in json.loads(driver.stdout)
