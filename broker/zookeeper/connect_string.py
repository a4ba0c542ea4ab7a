"""`zookeeper.connect` as ZooKeeper's ConnectStringParser reads it:
host[:port][,host[:port]...][/chroot], each port 2181 when left out, the chroot a
valid znode path (a lone "/" is no chroot)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PORT = 2181
MAX_PORT = 65535


@dataclass(frozen=True, slots=True)
class ConnectString:
    hosts: tuple[tuple[str, int], ...]
    chroot: str | None  # None: the root

    @property
    def servers(self) -> str:
        """The hosts without the chroot, as kazoo takes them."""
        return ",".join(
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.hosts
        )

    def __str__(self) -> str:
        return self.servers + (self.chroot or "")


def parse_connect_string(text: str) -> ConnectString:
    """Raises ValueError with the rule broken, in ZooKeeper's words where it has some."""
    text = text.strip()
    servers, slash, path = text.partition("/")
    chroot = None
    if slash and path:
        chroot = "/" + path
        validate_path(chroot)
    hosts = []
    for entry in servers.split(","):
        entry = entry.strip()
        if not entry:
            continue
        hosts.append(_host_port(entry))
    if not hosts:
        raise ValueError("A HostProvider may not be empty!")
    return ConnectString(tuple(hosts), chroot)


def _host_port(entry: str) -> tuple[str, int]:
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"Expecting host:port or [ipv6]:port, got {entry!r}")
        port_text = rest[1:] if rest else ""
    else:
        host, colon, port_text = entry.rpartition(":")
        if not colon:
            host, port_text = entry, ""
    if not host:
        raise ValueError(f"No host in {entry!r}")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) <= MAX_PORT:
        raise ValueError(f"Invalid port {port_text!r} in {entry!r}")
    return host, int(port_text)


def validate_path(path: str) -> None:
    """ZooKeeper's PathUtils.validatePath, for the chroot."""
    if not path.startswith("/"):
        raise ValueError(f'Invalid path string "{path}" caused by path must start with / character')
    if len(path) == 1:
        return
    if path.endswith("/"):
        raise ValueError(
            f'Invalid path string "{path}" caused by Path must not end with / character'
        )
    for index, node in enumerate(path[1:].split("/")):
        if not node:
            raise ValueError(
                f'Invalid path string "{path}" caused by empty node name specified @{index}'
            )
        if node in (".", ".."):
            raise ValueError(
                f'Invalid path string "{path}" caused by relative paths not allowed @{index}'
            )
        if "\0" in node:
            raise ValueError(
                f'Invalid path string "{path}" caused by null character not allowed @{index}'
            )
