"""A TLS listener: its own accept loop, each connection's handshake awaited on its own.

asyncio's TLS server (create_server(ssl=...)) drops a failed handshake -- an untrusted or
expired client certificate, a client speaking plaintext to a TLS listener -- in silence.
Kafka logs "Failed authentication with <peer> (SSL handshake failed)", and so does Brook:
each accepted socket is handed to loop.connect_accepted_socket(ssl=...), whose failure is
logged with the peer and the cause. The connection's protocol sees connection_made only
once the handshake is done, so no byte of it is read as a request before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from .authentication_counts import AuthenticationCounts
from .certificate_names import NoMatchingRule, distinguished_name, map_distinguished_name
from .listener_security import ListenerSecurity
from .principal import ANONYMOUS, KafkaPrincipal, user

log = logging.getLogger("brook.security")

# How long a client has to complete the TLS handshake.
TLS_HANDSHAKE_TIMEOUT_S = 30.0


class TlsServer:
    """What ListenerManager needs of a server: its sockets, close(), wait_closed()."""

    def __init__(
        self,
        sock: socket.socket,
        security: ListenerSecurity,
        protocol_factory: Callable[[], asyncio.Protocol],
        counts: AuthenticationCounts,
    ) -> None:
        self.sockets = [sock]
        self._counts = counts
        self._sock = sock
        self._security = security
        self._protocol_factory = protocol_factory
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.ensure_future(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # out of file descriptors, say: try again shortly
                log.warning("Listener %s: accept failed: %s", self._security.listener_name, exc)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.ensure_future(self._handshake(conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            peer_address = conn.getpeername()
            peer = f"{peer_address[0]}:{peer_address[1]}"
        except OSError:
            peer = "?"
        try:
            await loop.connect_accepted_socket(
                self._protocol_factory,
                conn,
                ssl=self._security.ssl_context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
            )
        except asyncio.CancelledError:
            conn.close()
            raise
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            self._counts.failed[self._security.listener_name] += 1
            log.info(
                "Failed authentication with %s (listener %s): SSL handshake failed: %s",
                peer,
                self._security.listener_name,
                exc or type(exc).__name__,
            )
            conn.close()

    def close(self) -> None:
        self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket bound as create_server binds (SO_REUSEADDR)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def certificate_principal(
    transport: Any, security: ListenerSecurity, peer: str
) -> KafkaPrincipal | None:
    """The principal of an SSL listener's client: its certificate's distinguished name
    mapped by ssl.principal.mapping.rules (User:ANONYMOUS without a certificate); None,
    logged, when no rule maps it (Kafka fails the authentication)."""
    certificate = transport.get_extra_info("peercert")
    if not certificate:
        return ANONYMOUS
    name = distinguished_name(certificate.get("subject", ()))
    try:
        return user(map_distinguished_name(security.principal_rules, name))
    except NoMatchingRule as exc:
        log.info(
            "Failed authentication with %s (listener %s): %s (ssl.principal.mapping.rules)",
            peer,
            security.listener_name,
            exc,
        )
        return None
