"""The audit on a Spark standalone cluster, submitted by spark-submit: a master and a worker
started from the pyspark package's own launcher (bin/spark-class) on 127.0.0.1, free
ports, stopped by pid. The audit's tasks run in the worker's executor, whose Python
workers are this interpreter (PYSPARK_PYTHON), where brook is installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest

from brook.broker.testing import free_port, wait_for_port

from .audit_logs import GROUP, _batch_starts

# A broker writing the log, a Spark job (or a cluster's JVMs) in one test's setup: on
# a loaded 2-core machine that can pass pytest's 300 s default.
pytestmark = pytest.mark.timeout(900)

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 90


def _spark_class(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # spark-class ends in `exec java ...`: the pid is the JVM's. Its own process group,
    # so that stopping it reaches the executors a worker started, and nothing else.
    with open(log, "wb") as output:
        return subprocess.Popen(
            ["bash", str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _alive_workers(web_port: int) -> int:
    """The master's own count of its live workers (0 while its UI is still starting)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (urllib.error.HTTPError, json.JSONDecodeError):
        return 0  # the UI answers before its JSON is served (an error, or an empty page)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",  # the web UIs bind here too
        # No REST submission server (it would listen on the fixed port 6066).
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
    }
    port, web_port = free_port(), free_port()
    master = _spark_class(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        ],
        tmp_path / "master.log",
        env,
    )
    started = [master]
    try:
        wait_for_port(port, START_TIMEOUT_S, master)
        wait_for_port(web_port, START_TIMEOUT_S, master)
        worker = _spark_class(
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                "2",
                "--memory",
                "2g",
                "--work-dir",
                str(tmp_path / "work"),
                f"spark://127.0.0.1:{port}",
            ],
            tmp_path / "worker.log",
            env,
        )
        started.append(worker)
        # Wait for the master to count the worker as alive (its own state, not a sleep).
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_workers(web_port) < 1:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker did not register"
            time.sleep(0.2)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(started):
            _stop(process)


def test_spark_submit_runs_the_audit_script_on_a_standalone_cluster(
    standalone_cluster, audit_log, tmp_path
):
    """spark-submit runs brook/spark/audit/__main__.py as a file (its directory first on
    sys.path) against the cluster: spark-submit's --master and --conf stand, the
    partition tasks run in the worker's executor, and the audit finds the one flipped bit.
    (One audit for both: `brook audit --master URL` builds the same session from its
    option, and each audit here costs a JVM's start and a minute of a loaded machine.)"""
    from brook.spark import audit

    from .test_audit import _kafka_python_segment

    log_dir = tmp_path / "log"
    log_dir.mkdir()
    for name in ("orders-0", "__consumer_offsets-0", "__consumer_offsets-1"):
        shutil.copytree(audit_log.data / name, log_dir / name)
    segment = sorted((log_dir / "orders-0").glob("*.log"))[0]
    raw = bytearray(segment.read_bytes())
    raw[_batch_starts(bytes(raw))[-1] + 70] ^= 0x01  # one bit of its last batch
    segment.write_bytes(raw)
    kafka_python_records = _kafka_python_segment(log_dir / "kp-0")

    script = Path(audit.__file__).parent / "__main__.py"
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    out = tmp_path / "report"
    ran = subprocess.run(
        [
            "bash",
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            standalone_cluster,
            "--conf",
            "spark.executor.memory=1g",
            "--conf",
            "spark.ui.enabled=false",
            str(script),
            str(log_dir),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    # spark-submit's JVM runs the Python driver and passes its output on, both streams.
    output = ran.stdout + ran.stderr
    assert ran.returncode == 1, output[-3000:]
    assert "FAILED: crc_mismatch;" in output and "[6/6] writing the report" in output
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert summary["spark"]["master"] == standalone_cluster
    assert summary["checks"]["crc_mismatch"]["count"] == 1
    assert summary["integrity_failures"] == 1
    assert summary["topics"]["kp"]["records"] == kafka_python_records
    # The partition tasks ran in the cluster's executor: they decoded the group's commits.
    offsets = pq.read_table(out / "consumer_offsets.parquet").to_pylist()
    assert {o["group"] for o in offsets} == {GROUP}
    assert {(o["topic"], o["partition"]) for o in offsets} == set(audit_log.committed)
