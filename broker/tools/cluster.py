"""`brook cluster`: a local development cluster, ZooKeeper and N brokers on this machine.

    brook cluster --brokers 3
    brook cluster --brokers 3 --data-dir ./dev-cluster --base-port 19092 \\
        --override log.retention.hours=1
    brook cluster restart 2 --data-dir ./dev-cluster      (from another shell)

It starts a ZooKeeper (Debian's `zookeeper` package, 3.8) and `brook serve` for each
broker (ids 1..N, PLAINTEXT on 127.0.0.1 from --base-port up, data in
<data-dir>/broker-<id>, all under one ZooKeeper chroot), waits until every broker has
registered and its Metadata names every broker and the controller, prints the bootstrap
servers, and stops everything it started, by pid, on Ctrl-C (or SIGTERM). Each process
logs to <data-dir>/<name>.log.

A broker that exits (or is killed, to try a failover) is reported with the command that
brings it back: `brook cluster restart N --data-dir DIR` stops broker N if it runs, starts
it again under the running cluster, so that Ctrl-C stops it with the rest, and returns
once it is ready in the same sense.

Replication is set as in the compose cluster (deploy/cluster/compose.yaml): new topics,
the consumer offsets and the transaction state on min(3, N) brokers, and acks=all
answered once all but one of them have a record (min.insync.replicas, at least 1), so
one broker can be down without refusing writes. --override changes any of it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

CHROOT = "/brook"
READY_TIMEOUT_S = 60.0
METADATA_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 30.0
# Between two looks at the brokers (and at a `restart` request).
WATCH_INTERVAL_S = 0.2


DEV_SESSION_TIMEOUT_MS = 6000


def replication_defaults(brokers: int) -> dict[str, int]:
    """The compose cluster's replication settings, for a cluster of `brokers`."""
    replicas = min(3, brokers)
    return {
        "default.replication.factor": replicas,
        "min.insync.replicas": max(1, replicas - 1),
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": max(1, replicas - 1),
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": max(1, replicas - 1),
    }


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "cluster",
        help="run a local development cluster (ZooKeeper and N brokers) until Ctrl-C;"
        " `brook cluster restart N` brings broker N back",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=["restart"],
        help="restart broker N of the cluster running on --data-dir (started again if it died)",
    )
    parser.add_argument("broker_id", nargs="?", type=int, metavar="N", help="(restart) a broker id")
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
    if args.action == "restart":
        return restart(args)
    if args.broker_id is not None:
        print("brook cluster: a broker id goes with `restart` only", file=sys.stderr)
        return 2
    from brook.broker.local_ports import free_port
    from brook.broker.zookeeper.server import ZooKeeperServer

    from .cluster_control import ControlServer

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
    cluster: DevCluster | None = None
    control: ControlServer | None = None
    try:
        print(f"Starting ZooKeeper on {zookeeper.connect} ...", flush=True)
        zookeeper.start()
        ports = {
            broker_id: free_port() if args.base_port == 0 else args.base_port + broker_id - 1
            for broker_id in range(1, args.brokers + 1)
        }
        cluster = DevCluster(data_dir, zookeeper.connect, ports, args.override, stop_asked)
        for broker_id in ports:
            cluster.start(broker_id, print_line)
        if not cluster.wait_ready(set(ports)):
            return 1
        control = ControlServer(data_dir)
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports.values())
        print(f"Bootstrap servers: {bootstrap}", flush=True)
        print(f"Logs and data in {data_dir}; Ctrl-C stops the cluster", flush=True)
        return cluster.watch(control)
    finally:
        if control is not None:
            control.close()
        if cluster is not None:
            cluster.stop_all()
        zookeeper.stop()
        print("Cluster stopped", flush=True)


def restart(args: argparse.Namespace) -> int:
    from .cluster_control import send

    if args.broker_id is None:
        print("brook cluster: restart needs a broker id: brook cluster restart N", file=sys.stderr)
        return 2
    try:
        ok = send(args.data_dir, f"restart {args.broker_id}", print_line)
    except ConnectionError as exc:
        print(f"brook cluster: {exc} (give the cluster's --data-dir)", file=sys.stderr)
        return 1
    return 0 if ok else 1


def print_line(line: str) -> None:
    print(line, flush=True)


class DevCluster:
    """The brokers this command runs: how each is started, its process, and whether it
    has registered in ZooKeeper."""

    def __init__(
        self,
        data_dir: Path,
        zookeeper_connect: str,
        ports: dict[int, int],
        overrides: list[str],
        stop_asked: list[int],
    ) -> None:
        from ..zookeeper.kazoo_api import KazooClient

        self.data_dir = data_dir
        self.ports = ports
        self.stop_asked = stop_asked
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self._connect = zookeeper_connect + CHROOT
        self._overrides = overrides
        self._defaults: dict[str, int] = {
            **replication_defaults(len(ports)),
            # A developer's cluster fails over in seconds, not Kafka's 18 s: a killed
            # broker's session ends after this (ZooKeeper's 2 s tick allows 4 s up).
            "zookeeper.session.timeout.ms": DEV_SESSION_TIMEOUT_MS,
        }
        self._zookeeper = KazooClient(
            zookeeper_connect, timeout=10, logger=logging.getLogger("brook.zookeeper.server")
        )
        self._zookeeper.start(timeout=30)

    def command(self, broker_id: int) -> list[str]:
        overrides: dict[str, object] = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[broker_id]}",
            "log.dirs": str(self.data_dir / f"broker-{broker_id}"),
            "zookeeper.connect": self._connect,
            **self._defaults,
        }
        command = [sys.executable, "-m", "brook.broker.cli", "serve"]
        for key, value in overrides.items():
            command += ["--override", f"{key}={value}"]
        # The user's last: a later --override of a key wins.
        for extra in self._overrides:
            command += ["--override", extra]
        return command

    def start(self, broker_id: int, say: Callable[[str], None]) -> None:
        with open(self.data_dir / f"broker-{broker_id}.log", "ab") as log_file:
            # A session of its own: a terminal's Ctrl-C reaches this command, which stops
            # the brokers in order, and not each broker at once.
            self.processes[broker_id] = subprocess.Popen(
                self.command(broker_id),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        say(f"Started broker {broker_id} on 127.0.0.1:{self.ports[broker_id]}")

    def stop(self, broker_id: int, say: Callable[[str], None]) -> None:
        process = self.processes[broker_id]
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            say(f"Broker {broker_id} did not stop within {STOP_TIMEOUT_S:.0f} s: killing it")
            process.kill()
            process.wait(10)

    def stop_all(self) -> None:
        if self.processes:
            print("Stopping the brokers ...", flush=True)
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for broker_id in self.processes:
            self.stop(broker_id, print_line)
        self._zookeeper.stop()
        self._zookeeper.close()

    def registration_owner(self, broker_id: int) -> int | None:
        """The ZooKeeper session that holds /brokers/ids/<id> (None: not registered)."""
        stat = self._zookeeper.exists(f"{CHROOT}/brokers/ids/{broker_id}")
        return None if stat is None else int(stat.ephemeralOwner)

    def serves_the_cluster(self, broker_id: int) -> bool:
        """Whether broker `broker_id` answers Metadata naming every running broker and a
        controller among them: what a client needs of it. Registered is not enough: the
        controller tells a broker the cluster (UpdateMetadata) a moment after that."""
        from .common import ToolError
        from .wire_client import KafkaCluster

        running = {b for b, process in self.processes.items() if process.poll() is None}
        try:
            with KafkaCluster(
                f"127.0.0.1:{self.ports[broker_id]}", METADATA_TIMEOUT_S, "brook-cluster"
            ) as cluster:
                metadata = cluster.metadata(topics=())
        except (ToolError, OSError):
            return False
        return running <= set(metadata.brokers) and metadata.controller_id in running

    def wait_ready(
        self, expected: set[int], replacing: dict[int, int | None] | None = None
    ) -> bool:
        """Until every broker of `expected` is registered, each by a session other than
        the one `replacing` names (a restarted broker's old one), and serves the cluster
        (serves_the_cluster); False if one exits first, or after READY_TIMEOUT_S."""
        replacing = replacing or {}
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = set(expected)
        while not self.stop_asked:
            for broker_id in list(waiting):
                owner = self.registration_owner(broker_id)
                if (
                    owner is not None
                    and owner != replacing.get(broker_id)
                    and self.serves_the_cluster(broker_id)
                ):
                    waiting.discard(broker_id)
            if not waiting:
                return True
            for broker_id in waiting:
                process = self.processes[broker_id]
                if process.poll() is not None:
                    print(
                        f"brook cluster: broker {broker_id} exited with code"
                        f" {process.returncode} before it was ready; see"
                        f" {self.data_dir / f'broker-{broker_id}.log'}",
                        file=sys.stderr,
                        flush=True,
                    )
                    return False
            if time.monotonic() > deadline:
                print(
                    f"brook cluster: brokers not ready after {READY_TIMEOUT_S:.0f} s:"
                    f" {sorted(waiting)}",
                    file=sys.stderr,
                    flush=True,
                )
                return False
            time.sleep(0.1)
        return False

    def restart(self, broker_id: int, say: Callable[[str], None]) -> bool:
        if broker_id not in self.processes:
            say(f"There is no broker {broker_id}: the brokers are {sorted(self.processes)}")
            return False
        old_owner = self.registration_owner(broker_id)
        if self.processes[broker_id].poll() is None:
            say(f"Stopping broker {broker_id} ...")
            self.stop(broker_id, say)
        self.start(broker_id, say)
        if old_owner is not None:
            # A killed broker's registration stays until its ZooKeeper session times
            # out; the new process waits for that before it registers.
            say(f"Waiting for broker {broker_id} to register (after its old session ends)")
        if not self.wait_ready({broker_id}, {broker_id: old_owner}):
            say(f"Broker {broker_id} did not come back; see its log")
            return False
        say(f"Broker {broker_id} is back")
        return True

    def watch(self, control: Any) -> int:
        """Until Ctrl-C: a broker that exits is reported once (again after a restart),
        and `restart` requests are served."""
        reported: set[int] = set()

        def handle(request: str, say: Callable[[str], None]) -> bool:
            action, _, argument = request.partition(" ")
            if action != "restart" or not argument.isdigit():
                say(f"Unknown request {request!r}")
                return False
            broker_id = int(argument)

            def both(line: str) -> None:
                print_line(line)
                say(line)

            restarted = self.restart(broker_id, both)
            reported.discard(broker_id)
            return restarted

        while not self.stop_asked:
            for broker_id, process in self.processes.items():
                if process.poll() is not None and broker_id not in reported:
                    print(
                        f"Broker {broker_id} exited with code {process.returncode}; see its"
                        f" log. Bring it back with: brook cluster restart {broker_id}"
                        f" --data-dir {self.data_dir}",
                        flush=True,
                    )
                    reported.add(broker_id)
            control.serve_one(WATCH_INTERVAL_S, handle)
        return 0


def _stop_on_signals() -> list[int]:
    """The signal that asked for the stop, once one has (a list, filled by the handler)."""
    asked: list[int] = []

    def handler(signum: int, _: FrameType | None) -> None:
        asked.append(signum)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return asked
