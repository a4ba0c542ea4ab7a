"""Free TCP ports on 127.0.0.1 for servers that tests and local clusters start (brokers,
ZooKeeper, Apache Kafka, Spark), picked so that the server's bind cannot lose the port
to another process in the moment between the probe and the bind."""

from __future__ import annotations

import os
import socket
from pathlib import Path

# Ports handed out by this process: the OS may offer a port again as soon as the probe
# socket closes, and a broker given two listeners on one port refuses to start.
_HANDED_OUT: set[int] = set()
# Ports are taken below the kernel's ephemeral range: a port from inside it can be given
# to some client's outgoing connection between the probe and the broker's bind. Each
# pytest-xdist worker draws from its own slice, so two workers never hand out one port.
_LOWEST_PORT = 10000
_PORTS_PER_WORKER = 1500


def _ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _worker_ports() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    slices = max(1, (_ephemeral_range_start() - _LOWEST_PORT) // _PORTS_PER_WORKER)
    start = _LOWEST_PORT + (index % slices) * _PORTS_PER_WORKER
    return range(start, start + _PORTS_PER_WORKER)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now, never the same one twice in this process (until
    its worker's slice runs out), outside the range the kernel gives outgoing sockets."""
    ports = _worker_ports()
    for _ in range(2):
        for port in ports:
            if port not in _HANDED_OUT and _bindable(port):
                _HANDED_OUT.add(port)
                return port
        _HANDED_OUT.difference_update(ports)  # every port handed out once: start over
    # The slice is all taken by others: fall back on a port the kernel picks.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        fallback: int = sock.getsockname()[1]
    return fallback
