"""`brook cluster`: ZooKeeper and three brokers from one command, the bootstrap servers
printed, the compose cluster's replication settings, a killed broker brought back by
`brook cluster restart N` as a child of the cluster, everything it started gone after
Ctrl-C."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import yaml
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from brook.broker.tools.cluster import replication_defaults
from tests.integration.clients import consume_all, produce

BROOK = [sys.executable, "-m", "brook.broker.cli"]
COMPOSE = Path(__file__).parents[2] / "deploy" / "cluster" / "compose.yaml"


class Output:
    """The cluster command's output, line by line, read on a thread of its own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(
            target=lambda: [self.lines.put(line) for line in stdout], daemon=True
        ).start()

    def until(self, prefix: str, timeout_s: float = 120) -> str:
        """The first line from here on that starts with `prefix`."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line starting {prefix!r} in {self.seen}"
            try:
                line = self.lines.get(timeout=remaining).rstrip("\n")
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line


def brokers_of(process: subprocess.Popen[str]) -> dict[int, psutil.Process]:
    """The cluster command's broker children, by broker id."""
    found = {}
    for child in psutil.Process(process.pid).children():
        arguments = child.cmdline()
        if "serve" in arguments:
            (broker_id,) = [a.split("=")[1] for a in arguments if a.startswith("broker.id=")]
            found[int(broker_id)] = child
    return found


def live_brokers(bootstrap: str) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    return sorted(metadata.brokers)


def test_the_replication_defaults_are_the_compose_clusters():
    environment = yaml.safe_load(COMPOSE.read_text())["x-broker-environment"]
    compose = {
        key.removeprefix("BROOK_").lower().replace("_", "."): int(value)
        for key, value in environment.items()
        if "REPLICATION" in key or "INSYNC" in key or "MIN_ISR" in key
    }
    assert replication_defaults(3) == compose
    # Fewer brokers: as many replicas as there are brokers, one of them allowed down.
    assert replication_defaults(1)["min.insync.replicas"] == 1
    assert replication_defaults(2)["default.replication.factor"] == 2


def test_brook_cluster_runs_three_brokers_restarts_a_killed_one_and_stops_on_ctrl_c(
    tmp_path: Path,
):
    data_dir = tmp_path / "dev"
    command = [*BROOK, "cluster", "--brokers", "3", "--base-port", "0", "--data-dir", str(data_dir)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = Output(process)
        bootstrap = output.until("Bootstrap servers:").split(":", 1)[1].strip()
        assert len(bootstrap.split(",")) == 3, output.seen
        children = list(brokers_of(process).values())
        assert len(children) == 3
        for server in bootstrap.split(","):
            metadata = AdminClient({"bootstrap.servers": server}).list_topics(timeout=15)
            assert sorted(metadata.brokers) == [1, 2, 3]
            assert metadata.controller_id in (1, 2, 3)

        # A topic made without a replication factor gets the cluster's: three replicas,
        # min.insync.replicas 2.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("dev", 1)])["dev"].result(30)
        produce(bootstrap, "dev", [(b"k", b"hello")])
        assert [m.value() for m in consume_all(bootstrap, "dev", 1)] == [b"hello"]
        replicas = admin.list_topics("dev", timeout=15).topics["dev"].partitions[0].replicas
        assert sorted(replicas) == [1, 2, 3]
        resource = ConfigResource(ConfigResource.Type.TOPIC, "dev")
        configs = admin.describe_configs([resource])[resource].result(15)
        assert configs["min.insync.replicas"].value == "2"

        # Broker 2 killed: reported with the command that brings it back, which does,
        # as a child of the cluster.
        killed = brokers_of(process)[2]
        killed.kill()
        reported = output.until("Broker 2 exited")
        assert f"brook cluster restart 2 --data-dir {data_dir}" in reported
        restarted = subprocess.run(
            [*BROOK, "cluster", "restart", "2", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert restarted.returncode == 0, restarted
        assert restarted.stdout.splitlines()[-1] == "Broker 2 is back", restarted.stdout
        assert live_brokers(bootstrap) == [1, 2, 3]
        back = brokers_of(process)[2]
        assert back.pid != killed.pid
        children.append(back)

        # No such broker, or no cluster: one line and a failure.
        missing = subprocess.run(
            [*BROOK, "cluster", "restart", "7", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert missing.returncode == 1
        assert missing.stdout.strip() == "There is no broker 7: the brokers are [1, 2, 3]"
        nowhere = subprocess.run(
            [*BROOK, "cluster", "restart", "2", "--data-dir", str(tmp_path / "elsewhere")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert nowhere.returncode == 1
        assert "no `brook cluster` is running on" in nowhere.stderr

        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        output.until("Cluster stopped")
        for child in children:
            with_deadline(lambda child=child: not running(child))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def with_deadline(condition, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)
