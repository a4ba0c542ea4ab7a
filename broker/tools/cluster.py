"""`brook cluster`: a local development cluster, ZooKeeper and N brokers on this machine.

    brook cluster --brokers 3
    brook cluster --brokers 3 --data-dir ./dev-cluster --base-port 19092 \\
        --override log.retention.hours=1

It starts a ZooKeeper (Debian's `zookeeper` package, 3.8) and `brook serve` for each
broker (ids 1..N, PLAINTEXT on 127.0.0.1 from --base-port up, data in
<data-dir>/broker-<id>, all under one ZooKeeper chroot), waits until every broker has
registered, prints the bootstrap servers, and stops everything it started, by pid, on
Ctrl-C (or SIGTERM). The internal topics replicate min(3, N) times, as a small Kafka
cluster is usually set up. Each process logs to <data-dir>/<name>.log.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

CHROOT = "/brook"
REGISTRATION_TIMEOUT_S = 60.0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "cluster",
        help="run a local development cluster (ZooKeeper and N brokers) until Ctrl-C",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, default=3, metavar="N", help="brokers (3)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("brook-cluster"),
        metavar="DIR",
        help="where ZooKeeper and the brokers keep their data and logs (./brook-cluster)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=9092,
        metavar="PORT",
        help="broker 1 listens here, broker 2 one above, ... (9092; 0: free ports)",
    )
    parser.add_argument(
        "--zookeeper-port", type=int, default=0, metavar="PORT", help="(a free port)"
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker (repeatable)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from brook.broker.zookeeper.server import ZooKeeperServer, free_port

    # kazoo's own lines (a first connection refused while ZooKeeper starts) are noise here.
    logging.getLogger("brook.zookeeper.server").setLevel(logging.ERROR)

    if args.brokers < 1:
        print("brook cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    if not ZooKeeperServer.installed():
        print(
            "brook cluster: ZooKeeper is not installed (Debian: apt-get install zookeeper)",
            file=sys.stderr,
        )
        return 1
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    stop_asked = _stop_on_signals()
    zookeeper = ZooKeeperServer(data_dir / "zookeeper", args.zookeeper_port or None, tick_ms=2000)
    brokers: dict[int, subprocess.Popen[bytes]] = {}
    try:
        print(f"Starting ZooKeeper on {zookeeper.connect} ...", flush=True)
        zookeeper.start()
        ports = {
            broker_id: free_port() if args.base_port == 0 else args.base_port + broker_id - 1
            for broker_id in range(1, args.brokers + 1)
        }
        internal_rf = min(3, args.brokers)
        for broker_id, port in ports.items():
            overrides = {
                "broker.id": broker_id,
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(data_dir / f"broker-{broker_id}"),
                "zookeeper.connect": zookeeper.connect + CHROOT,
                "offsets.topic.replication.factor": internal_rf,
                "transaction.state.log.replication.factor": internal_rf,
            }
            command = [sys.executable, "-m", "brook.broker.cli", "serve"]
            for key, value in overrides.items():
                command += ["--override", f"{key}={value}"]
            for extra in args.override:
                command += ["--override", extra]
            with open(data_dir / f"broker-{broker_id}.log", "ab") as log_file:
                brokers[broker_id] = subprocess.Popen(
                    command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
                )
            print(f"Started broker {broker_id} on 127.0.0.1:{port}", flush=True)
        if not _wait_registered(zookeeper.connect, set(ports), brokers, stop_asked):
            return 1
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports.values())
        print(f"Bootstrap servers: {bootstrap}", flush=True)
        print(f"Logs and data in {data_dir}; Ctrl-C stops the cluster", flush=True)
        return _watch(brokers, stop_asked)
    finally:
        _stop(brokers, zookeeper)


def _stop_on_signals() -> list[int]:
    """The signal that asked for the stop, once one has (a list, filled by the handler)."""
    asked: list[int] = []

    def handler(signum: int, _: FrameType | None) -> None:
        asked.append(signum)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return asked


def _wait_registered(
    connect: str,
    expected: set[int],
    brokers: dict[int, subprocess.Popen[bytes]],
    stop_asked: list[int],
) -> bool:
    """Until every broker has its /brokers/ids znode (False if one exits first)."""
    from kazoo.client import KazooClient

    ids = CHROOT + "/brokers/ids"
    client = KazooClient(connect, timeout=10, logger=logging.getLogger("brook.zookeeper.server"))
    client.start(timeout=30)
    try:
        deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
        registered: set[int] = set()
        while not stop_asked:
            if client.exists(ids):
                registered = {int(child) for child in client.get_children(ids)}
            if expected <= registered:
                return True
            for broker_id, process in brokers.items():
                if process.poll() is not None:
                    print(
                        f"brook cluster: broker {broker_id} exited with code"
                        f" {process.returncode} before registering; see its log",
                        file=sys.stderr,
                    )
                    return False
            if time.monotonic() > deadline:
                print(
                    "brook cluster: brokers not registered after"
                    f" {REGISTRATION_TIMEOUT_S:.0f} s: {sorted(expected - registered)}",
                    file=sys.stderr,
                )
                return False
            time.sleep(0.1)
        return False
    finally:
        client.stop()
        client.close()


def _watch(brokers: dict[int, subprocess.Popen[bytes]], stop_asked: list[int]) -> int:
    """Until Ctrl-C; a broker that exits meanwhile is reported once."""
    reported: set[int] = set()
    while not stop_asked:
        for broker_id, process in brokers.items():
            if process.poll() is not None and broker_id not in reported:
                print(
                    f"Broker {broker_id} exited with code {process.returncode}; see its log",
                    flush=True,
                )
                reported.add(broker_id)
        time.sleep(0.2)
    return 0


def _stop(brokers: dict[int, subprocess.Popen[bytes]], zookeeper: Any) -> None:
    if brokers:
        print("Stopping the brokers ...", flush=True)
    for process in brokers.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for broker_id, process in brokers.items():
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            print(f"Broker {broker_id} did not stop within 30 s: killing it", flush=True)
            process.kill()
            process.wait(10)
    zookeeper.stop()
    print("Cluster stopped", flush=True)
