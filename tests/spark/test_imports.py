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
