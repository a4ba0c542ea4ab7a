"""Whether a listener serves a tool that speaks PLAINTEXT, asked before the tool relies on it.

A tool run without --command-config speaks PLAINTEXT. A listener that needs SASL answers
ApiVersions, then closes the connection on the next request; one that needs TLS fails
its handshake on the plaintext bytes. A client then reports only a transport failure
(librdkafka's "_TRANSPORT"), or waits out the whole --timeout. So such a tool first sends one
Metadata request (no topics) in plaintext and, when the broker closes the connection or
answers in TLS, says at once what is likely wrong and what to pass (TLS when a TLS
handshake then succeeds, SASL otherwise).
"""

from __future__ import annotations

import socket
import ssl

from .common import ToolError

# The first bytes of a TLS record: content type alert (21) or handshake (22), version 3.x.
TLS_RECORD_STARTS = (b"\x15\x03", b"\x16\x03")

SASL_HINT = (
    "its listener likely needs SASL: pass --command-config FILE with"
    " security.protocol=SASL_PLAINTEXT and the login, e.g. sasl.mechanism=SCRAM-SHA-512,"
    " sasl.username=..., sasl.password=..."
)
TLS_HINT = (
    "its listener needs TLS: pass --command-config FILE with security.protocol=SSL"
    " (or SASL_SSL with the login) and ssl.ca.location=<the CA that signed the broker>"
)


def check_plaintext(host: str, port: int, timeout: float) -> None:
    """Raise a ToolError naming the likely cause when the listener at host:port does not
    serve PLAINTEXT; return when it answers (or says nothing within `timeout`: the tool's
    own request will report that)."""
    from kio.schema.metadata.v8 import request as metadata8

    from brook.broker.client import BlockingClient

    where = f"{host}:{port}"
    try:
        client = BlockingClient(host, port, "brook-tools", timeout)
    except OSError as exc:
        raise ToolError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    with client:
        request = metadata8.MetadataRequest(
            topics=(),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        first = b""
        try:
            client.send(request)
            while len(first) < 2:
                got = client.sock.recv(2 - len(first))
                if not got:
                    break
                first += got
        except TimeoutError:
            return
        except ConnectionError:
            pass
    if first in TLS_RECORD_STARTS or (not first and _speaks_tls(host, port, timeout)):
        raise ToolError(f"{where} did not take a plaintext request: {TLS_HINT}")
    if not first:
        raise ToolError(f"{where} closed the connection on a plaintext request: {SASL_HINT}")


def _speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether the listener completes a TLS handshake (its certificate unchecked: this
    only tells TLS from SASL, nothing is sent over it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as sock,
            context.wrap_socket(sock, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False
