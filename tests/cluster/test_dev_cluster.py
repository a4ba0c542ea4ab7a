"""`brook cluster`: ZooKeeper and three brokers from one command, the bootstrap servers
printed, everything it started gone after Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient


def test_brook_cluster_runs_three_brokers_until_ctrl_c(tmp_path: Path):
    command = [sys.executable, "-m", "brook.broker.cli", "cluster", "--brokers", "3"]
    command += ["--base-port", "0", "--data-dir", str(tmp_path / "dev")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output: list[str] = []
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if line.startswith("Bootstrap servers:"):
                break
        bootstrap = output[-1].split(":", 1)[1].strip()
        assert len(bootstrap.split(",")) == 3, output
        children = psutil.Process(process.pid).children(recursive=True)
        assert len(children) >= 4  # ZooKeeper and the three brokers
        for server in bootstrap.split(","):
            metadata = AdminClient({"bootstrap.servers": server}).list_topics(timeout=15)
            assert sorted(metadata.brokers) == [1, 2, 3]
            assert metadata.controller_id in (1, 2, 3)
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
        assert process.returncode == 0, rest
        assert "Cluster stopped" in rest
        deadline = time.monotonic() + 10
        while any(child.is_running() and child.status() != "zombie" for child in children):
            assert time.monotonic() < deadline, [c.pid for c in children if c.is_running()]
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
