"""A ZooKeeper server for tests and a local development cluster: ZooKeeper's jars (Debian's
`zookeeper` package, 3.8) run by the JVM with a zoo.cfg of its own, on 127.0.0.1 and a
port of its own, its data in a directory of the caller's, stopped by its pid.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..local_ports import free_port

JARS = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
START_TIMEOUT_S = 60.0
# ZooKeeper bounds session timeouts to 2 to 20 ticks: a 500 ms tick lets tests use
# sessions of 1 s upwards (Kafka's 18 s default is then cut to 10 s).
TEST_TICK_MS = 500


class ZooKeeperServer:
    def __init__(self, data_dir: Path, port: int | None = None, tick_ms: int = TEST_TICK_MS):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.log_path = data_dir / "zookeeper.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """host:port, for zookeeper.connect (a chroot may follow)."""
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def installed() -> bool:
        return (JARS / "zookeeper.jar").exists()

    def start(self) -> ZooKeeperServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            # Read-only counts (watches, the server's metrics) a test or the operator of
            # a local cluster may ask for; ZooKeeper answers only `srvr` by default.
            "4lw.commands.whitelist=srvr,mntr,wchs\n"
            # Keeps the server alone: no quorum, no leader election.
            "standaloneEnabled=true\n"
        )
        command = [
            "java",
            # Small: tests run several servers and brokers on two cores.
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{JARS}/*",
            MAIN_CLASS,
            str(config),
        ]
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_serving()
        return self

    def _wait_serving(self) -> None:
        """Until a client gets a session (a port that listens is not yet a server)."""
        from .kazoo_api import KazooClient

        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with code {self.process.returncode}:"
                    f" {self.log_path.read_text(errors='replace')[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.02)
        # A session of the shortest timeout: the first attempts may meet a server that
        # accepts but does not answer yet, and each waits for the read timeout.
        while True:
            client = KazooClient(
                self.connect, timeout=1, logger=logging.getLogger("brook.zookeeper.server")
            )
            try:
                client.start(timeout=2)
                return
            except client.handler.timeout_exception:
                if time.monotonic() > deadline:
                    raise
            finally:
                client.stop()
                client.close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
