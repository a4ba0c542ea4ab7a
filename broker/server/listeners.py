"""The broker's listeners, as Kafka's SocketServer keeps them.

Each listener (`listeners`, NAME://host:port) is a server socket of its own, and every
connection knows the listener it came in on: the endpoints a broker hands out (Metadata,
FindCoordinator) are those its `advertised.listeners` gives for that listener, which is
how one broker serves clients on the host and clients inside a container network with
different addresses (Kafka's INTERNAL/EXTERNAL set-ups). Listeners are per-broker dynamic
configs: AlterConfigs on this broker's resource binds added listeners and closes removed
ones (their connections with them).

When a client reaches a listener at an address other than the one that listener
advertises, it is sent to the advertised address next, and if it cannot reach it, it
loops on "connection refused". Reaching another address is often right (a port published
by Docker arrives at the container's own address; a NAT or load balancer at the host's), so
one warning per listener and address comes only where the advertised address is likely
out of the client's reach: a loopback address (localhost) advertised to a client on
another machine or in another container (the host that publishes a container's port,
the container's gateway, does reach it), a loopback port other than the one it dialled
on this machine, or a name this broker cannot resolve either.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config.broker_config import BrokerConfig, Listener
from ..config.dynamic import LISTENER_CONFIGS
from ..security.authentication_counts import AuthenticationCounts
from .connection_limits import ConnectionLimits

if TYPE_CHECKING:
    from .connection import KafkaConnection

log = logging.getLogger("brook.listeners")

ConnectionFactory = Callable[[str], "KafkaConnection"]

_WILDCARDS = ("", "0.0.0.0", "::")


class ListenerManager:
    def __init__(self, new_connection: ConnectionFactory) -> None:
        self._new_connection = new_connection
        self._servers: dict[str, asyncio.base_events.Server] = {}
        self._bound: dict[str, Listener] = {}  # with the real port (port 0 resolved)
        # The listeners as configured (port 0 unresolved), to tell a changed one.
        self._configured: dict[str, Listener] = {}
        self._advertised: dict[str, Listener] = {}
        # The addresses each advertised host resolves to, and the (listener, address)
        # pairs already warned about.
        self._advertised_addresses: dict[str, frozenset[str]] = {}
        self._warned: set[tuple[str, str]] = set()
        # This network namespace's default gateways: in a container, the host, whose
        # published ports arrive from there.
        self._gateways: frozenset[str] = frozenset()
        self._reconfiguring: asyncio.Task[None] | None = None
        # Successful and failed authentications per listener (TLS and SASL, for /metrics).
        self.authentications = AuthenticationCounts()
        # Connections open per client address, against max.connections.per.ip.
        self.connection_limits = ConnectionLimits()
        # Called as soon as the listeners of a reconfiguration are bound and advertised
        # (the broker announces its new endpoints, to its own cache and the cluster).
        self.on_reconfigured: list[Callable[[], None]] = []

    # --- what the broker hands out ------------------------------------------------------

    @property
    def bound(self) -> list[Listener]:
        return list(self._bound.values())

    def advertised(self) -> list[Listener]:
        """Every advertised listener, its port resolved where it listens on port 0."""
        return [self._resolve_port(listener) for listener in self._advertised.values()]

    def advertised_endpoint(self, listener_name: str) -> Listener | None:
        """The endpoint this broker gives clients of `listener_name` (None when the
        listener is not advertised: its clients get LISTENER_NOT_FOUND)."""
        listener = self._advertised.get(listener_name)
        return self._resolve_port(listener) if listener is not None else None

    def _resolve_port(self, listener: Listener) -> Listener:
        if listener.port != 0:
            return listener
        bound = self._bound.get(listener.name)
        return Listener(listener.name, listener.host, bound.port if bound else 0)

    # --- binding ------------------------------------------------------------------------

    async def start(self, config: BrokerConfig) -> None:
        self._advertised = {listener.name: listener for listener in config.advertised_listeners}
        for listener in config.listeners:
            await self._bind(listener, config)
        await self._resolve_advertised_hosts()

    def reconfigure(self, old: BrokerConfig, config: BrokerConfig) -> None:
        """Follow a change of `listeners` / `advertised.listeners` (AlterConfigs): bind
        what is new, close what is gone, advertise the new endpoints."""
        if all(old[name] == config[name] for name in LISTENER_CONFIGS):
            return
        previous = self._reconfiguring
        self._reconfiguring = asyncio.ensure_future(self._reconfigure(config, previous))

    async def reconfigured(self) -> None:
        """Wait for the last reconfiguration to be in place (for tests and shutdown)."""
        if self._reconfiguring is not None:
            await asyncio.wait([self._reconfiguring])

    async def _reconfigure(self, config: BrokerConfig, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        wanted = {listener.name: listener for listener in config.listeners}
        for name in list(self._servers):
            current = self._configured.get(name)
            if name not in wanted or wanted[name] != current:
                self._close(name)
        for name, listener in wanted.items():
            if name not in self._servers:
                try:
                    await self._bind(listener, config)
                except OSError as exc:
                    log.error(
                        "Could not listen on %s://%s:%d: %s",
                        name,
                        listener.host or "0.0.0.0",
                        listener.port,
                        exc,
                    )
        self._advertised = {listener.name: listener for listener in config.advertised_listeners}
        # At once, with no await between: a client of a listener just bound finds this
        # broker's endpoint on it in its next Metadata.
        for callback in self.on_reconfigured:
            callback()
        self._warned.clear()
        await self._resolve_advertised_hosts()
        log.info(
            "Listening on %s (advertised %s)",
            describe(self.bound),
            describe(self.advertised()),
        )

    async def _bind(self, listener: Listener, config: BrokerConfig) -> None:
        loop = asyncio.get_running_loop()
        security = config.listener_security.get(listener.name)
        if security is not None and security.ssl_context is not None:
            # A TLS listener accepts and shakes hands itself, to log failed handshakes.
            from ..security.tls_server import TlsServer, listening_socket

            tls_server = TlsServer(
                listening_socket(listener.host, listener.port),
                security,
                lambda: self._new_connection(listener.name),
                self.authentications,
            )
            self._servers[listener.name] = tls_server  # type: ignore[assignment]
            self._configured[listener.name] = listener
            port = tls_server.sockets[0].getsockname()[1]
            self._bound[listener.name] = Listener(listener.name, listener.host, port)
            return
        sock = _ip_listening_socket(listener.host, listener.port)
        if sock is not None:
            server = await loop.create_server(
                lambda: self._new_connection(listener.name), sock=sock, backlog=1024
            )
        else:
            server = await loop.create_server(
                lambda: self._new_connection(listener.name),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                backlog=1024,
            )
        self._servers[listener.name] = server
        self._configured[listener.name] = listener
        port = server.sockets[0].getsockname()[1]
        self._bound[listener.name] = Listener(listener.name, listener.host, port)

    def _close(self, name: str) -> None:
        server = self._servers.pop(name)
        server.close()
        self._bound.pop(name, None)
        self._configured.pop(name, None)
        log.info("Closed listener %s", name)

    def close(self) -> None:
        """Stop accepting on every listener (shutdown)."""
        for server in self._servers.values():
            server.close()

    async def wait_closed(self) -> None:
        for server in self._servers.values():
            await server.wait_closed()

    def is_open(self, listener_name: str) -> bool:
        return listener_name in self._servers

    # --- the dialled-address warning -----------------------------------------------------

    async def _resolve_advertised_hosts(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._advertised.values():
            try:
                infos = await loop.getaddrinfo(listener.host, None, type=socket.SOCK_STREAM)
            except OSError:
                infos = []
            # An IP family's address is a str (an int only for families not asked for here).
            self._advertised_addresses[listener.name] = frozenset(
                _normalized(info[4][0]) for info in infos if isinstance(info[4][0], str)
            )
        self._gateways = default_gateways()

    def check_dialled_address(
        self, listener_name: str, local_host: str, local_port: int, peer: str
    ) -> None:
        """Warn (once per listener and address) when a client reached this listener at an
        address other than the one it advertises, and the advertised one is likely out
        of that client's reach."""
        advertised = self._advertised.get(listener_name)
        if advertised is None:
            return
        local_host = _normalized(local_host)
        endpoint = self._resolve_port(advertised)
        addresses = self._advertised_addresses.get(listener_name, frozenset())
        if endpoint.port == local_port and local_host in addresses:
            return
        peer_host = _normalized(peer.rpartition(":")[0].strip("[]"))
        why = self._out_of_reach(addresses, endpoint.port, local_host, local_port, peer_host)
        dialled = f"{local_host}:{local_port}"
        if why is None or (listener_name, dialled) in self._warned:
            return
        self._warned.add((listener_name, dialled))
        log.warning(
            "A client (%s) reached listener %s at %s, but the listener advertises %s:%d,"
            " %s: clients are sent there for every request after the first, and one that"
            " cannot reach it retries forever. If clients connect by another address"
            " (a mapped port, a container or host name), set advertised.listeners to it.",
            peer,
            listener_name,
            dialled,
            endpoint.host,
            endpoint.port,
            why,
        )

    def _out_of_reach(
        self,
        advertised: frozenset[str],
        advertised_port: int,
        local_host: str,
        local_port: int,
        peer_host: str,
    ) -> str | None:
        """Why the advertised address is likely out of the client's reach, or None when
        it may well be right (a NAT, a published port, a load balancer)."""
        if not advertised:
            return "a name this broker cannot resolve either"
        if not all(_is_loopback(address) for address in advertised):
            # An address of another host or network: a NAT or a mapped port, as like as not.
            return None
        if _is_loopback(peer_host) or peer_host == local_host:
            # The client is on this machine, where localhost is this broker's.
            if advertised_port == local_port:
                return None
            return "a port of this machine's loopback other than the one the client dialled"
        if peer_host in self._gateways:
            # The host of this container: a port it publishes on its localhost forwards here.
            return None
        return (
            "a loopback address, which for a client on another machine or in another"
            " container is its own"
        )


def describe(listeners: list[Listener]) -> str:
    return ", ".join(f"{item.name}://{item.host or '0.0.0.0'}:{item.port}" for item in listeners)


def _normalized(address: str) -> str:
    """An IP address in one spelling (IPv4-mapped IPv6 as IPv4, no zone id)."""
    address = address.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def default_gateways() -> frozenset[str]:
    """The default routes' gateways of this network namespace (Linux; none elsewhere)."""
    gateways: set[str] = set()
    try:
        with open("/proc/net/route") as routes:
            for line in routes.readlines()[1:]:
                fields = line.split()
                # Destination 0.0.0.0 with a gateway (RTF_GATEWAY, 0x2), in host byte order.
                if len(fields) > 3 and fields[1] == "00000000" and int(fields[3], 16) & 0x2:
                    gateways.add(
                        str(ipaddress.IPv4Address(int(fields[2], 16).to_bytes(4, "little")))
                    )
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/net/ipv6_route") as routes:
            for line in routes:
                fields = line.split()
                # ::/0 with a next hop other than ::.
                if len(fields) > 4 and fields[0] == "0" * 32 and fields[1] == "00":
                    hop = ipaddress.IPv6Address(bytes.fromhex(fields[4]))
                    if not hop.is_unspecified:
                        gateways.add(str(hop))
    except (OSError, ValueError):
        pass
    return frozenset(gateways)


def is_wildcard(host: str) -> bool:
    return host in _WILDCARDS


def _ip_listening_socket(host: str, port: int) -> socket.socket | None:
    """A bound socket for an IP-literal host (None for a name, or all interfaces).

    Bound here rather than by create_server: its address lookup loads the idna codec
    for any host given as text, a few milliseconds of every start for nothing to look up.
    Bound as create_server binds (SO_REUSEADDR, IPv6 only on an IPv6 address), and a
    failure reads as its own does."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setblocking(False)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"error while attempting to bind on address {(host, port)!r}:"
                f" {(exc.strerror or str(exc)).lower()}",
            ) from None
    except BaseException:
        sock.close()
        raise
    return sock
