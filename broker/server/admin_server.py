"""The admin endpoint (`admin.listener=http[s]://HOST:PORT`, off by default): HTTP+JSON
control of a running broker for tests in any language, and its metrics and probes.

    POST   /v1/faults   arm one fault (a JSON object) or several (a list)
    GET    /v1/faults   what is armed, and every fault since the last clear with its count
    DELETE /v1/faults   clear them all
    GET    /metrics     Prometheus' text format (observability/collector.py)
    GET    /v1/health   200 while the event loop answers, else 503 (observability/health.py)
    GET    /v1/ready    200 while the broker serves, else 503 with the reasons

It is the standard library's threading HTTP server on a thread of its own (nothing
imported unless it is turned on); every action runs on the broker's event loop, where
the faults and the broker's state live. Fault injection answers only when
admin.fault.injection.enable is on; who may use the faults and /metrics is decided by
admin_auth.py; https serves TLS with the broker's key store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from ..authorizer.operations import AclOperation
from ..faults import FaultRegistry, FaultSpecError
from ..observability.broker_state import BrokerState
from ..observability.collector import CONTENT_TYPE, BrokerView, MetricsEndpoint, take_snapshot
from ..observability.health import LIVE_TIMEOUT_S, readiness
from .admin_auth import FAULTS_OPERATION, METRICS_OPERATION, AdminAccess, AdminAuthenticator

log = logging.getLogger("brook.admin")

T = TypeVar("T")

_URL = re.compile(r"^(?P<scheme>https?)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)/?$")
MAX_BODY_BYTES = 1 << 20
CALL_TIMEOUT_S = 10


def parse_admin_url(url: str) -> tuple[str, int]:
    """(host, port) of an admin.listener value; ValueError when it is not
    http[s]://HOST:PORT."""
    match = _URL.match(url.strip())
    if not match or int(match["port"]) > 65535:
        raise ValueError(f"expected http://HOST:PORT or https://HOST:PORT, got {url!r}")
    return match["host"].strip("[]"), int(match["port"])


def is_https(url: str) -> bool:
    return url.strip().lower().startswith("https://")


class _AdminHttpServer(ThreadingHTTPServer):
    """With TLS, each connection's handshake runs on its own request thread (a slow or
    silent client holds only its thread, not the accepting one)."""

    ssl_context: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.ssl_context is None:
            return sock, address
        return (
            self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False),
            address,
        )

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(CALL_TIMEOUT_S)
            try:
                request.do_handshake()
            except (OSError, ssl.SSLError) as exc:
                log.info("Admin endpoint: TLS handshake with %s failed: %s", client_address[0], exc)
                return
        super().finish_request(request, client_address)


class AdminServer:
    def __init__(
        self,
        url: str,
        loop: asyncio.AbstractEventLoop,
        faults: FaultRegistry,
        view: BrokerView | None = None,
        auth: AdminAuthenticator | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host, port = parse_admin_url(url)
        self.scheme = "https" if is_https(url) else "http"
        self.loop = loop
        self.faults = faults
        # None: everyone may (a test broker).
        self.auth = auth
        # The broker /metrics and the health endpoints read (None: faults only).
        self.view = view
        self.metrics = (
            MetricsEndpoint(lambda: self.on_loop(lambda: take_snapshot(view)))
            if view is not None
            else None
        )
        if self.scheme == "https" and ssl_context is None:
            raise ValueError("https needs a TLS context")
        self._server = _AdminHttpServer((self.host or "0.0.0.0", port), _handler_for(self))
        self._server.ssl_context = ssl_context if self.scheme == "https" else None
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="brook-admin", daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host or '0.0.0.0'}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        log.info(
            "Admin endpoint on %s (%s; fault injection %s; %s)",
            self.url,
            "/metrics, /v1/health, /v1/ready" if self.view is not None else "no metrics",
            "on: /v1/faults" if self.faults.enabled else "off",
            "credentials required"
            if self.auth is not None and self.auth.required
            else "open to everyone who reaches it",
        )

    def access(self, authorization: str | None, host: str, operation: AclOperation) -> AdminAccess:
        if self.auth is None:
            return AdminAccess(None, True)
        return self.auth.check(authorization, host, operation)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def on_loop(self, action: Callable[[], T], timeout_s: float = CALL_TIMEOUT_S) -> T:
        """Run `action` on the broker's loop and return its result (from a server thread);
        TimeoutError when the loop has not run it within `timeout_s`."""

        async def run() -> T:
            return action()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout_s)

    def health(self, timeout_s: float = LIVE_TIMEOUT_S) -> tuple[HTTPStatus, dict[str, Any]]:
        """Live: the loop answers within `timeout_s` (or the broker is still starting)."""
        assert self.view is not None
        view = self.view
        try:
            state = BrokerState(self.on_loop(view.state, timeout_s))
        except TimeoutError:
            # Read off the loop: a starting broker recovering its logs holds the loop.
            state = BrokerState(view.state())
            if state in (BrokerState.STARTING, BrokerState.RECOVERY):
                return HTTPStatus.OK, {"live": True, "state": state.title}
            reason = f"the event loop did not answer within {timeout_s:g} s"
            log.warning("Health check failed: %s", reason)
            return HTTPStatus.SERVICE_UNAVAILABLE, {"live": False, "reason": reason}
        return HTTPStatus.OK, {"live": True, "state": state.title}

    def readiness(self, timeout_s: float = LIVE_TIMEOUT_S) -> tuple[HTTPStatus, dict[str, Any]]:
        assert self.view is not None
        view = self.view
        state = BrokerState(view.state())
        if state is not BrokerState.RUNNING:
            # Answered off the loop: a starting broker may hold it for long.
            answer: dict[str, Any] = {"ready": False, "state": state.title}
            answer["reason"] = f"the broker is {state.title}"
            return HTTPStatus.SERVICE_UNAVAILABLE, answer
        try:
            answer = self.on_loop(lambda: readiness(view), timeout_s)
        except TimeoutError:
            reason = f"the event loop did not answer within {timeout_s:g} s"
            return HTTPStatus.SERVICE_UNAVAILABLE, {"ready": False, "reason": reason}
        if answer["ready"]:
            return HTTPStatus.OK, answer
        answer["reason"] = "; ".join(answer["reasons"])
        return HTTPStatus.SERVICE_UNAVAILABLE, answer


def _handler_for(admin: AdminServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "Brook"

        def do_GET(self) -> None:
            path = self._path()
            if path == "/v1/faults":
                if self._faults_refused():
                    return None
                return self._send(HTTPStatus.OK, admin.on_loop(admin.faults.listing))
            if admin.view is not None:
                if path == "/metrics":
                    if self._refused(METRICS_OPERATION):
                        return None
                    return self._send_metrics()
                if path in ("/v1/health", "/v1/ready"):
                    try:
                        timeout_s = self._timeout_s()
                    except ValueError as exc:
                        return self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
                    check = admin.health if path == "/v1/health" else admin.readiness
                    status, answer = check(timeout_s)
                    if "reasons" in answer and not self._access(METRICS_OPERATION).allowed:
                        # The reasons name partitions: only for those who may read metrics.
                        answer = {key: answer[key] for key in ("ready", "state") if key in answer}
                    return self._send(status, answer)
            self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})

        def _access(self, operation: AclOperation) -> AdminAccess:
            return admin.access(
                self.headers.get("Authorization"), self.client_address[0], operation
            )

        def _refused(self, operation: AclOperation) -> bool:
            """Answer 401 or 403 to a request that may not do `operation`."""
            access = self._access(operation)
            if access.allowed:
                return False
            if access.principal is None:
                self._send(
                    HTTPStatus.UNAUTHORIZED,
                    {"error": f"Authentication required ({access.reason})"},
                    {"WWW-Authenticate": 'Basic realm="brook", charset="UTF-8"'},
                )
            else:
                self._send(
                    HTTPStatus.FORBIDDEN,
                    {"error": f"{access.principal} may not {operation.name} the cluster"},
                )
            return True

        def _faults_refused(self) -> bool:
            if self._refused(FAULTS_OPERATION):
                return True
            if not admin.faults.enabled:
                self._send(
                    HTTPStatus.FORBIDDEN,
                    {"error": "Fault injection is off: set admin.fault.injection.enable=true"},
                )
                return True
            return False

        def _send_metrics(self) -> None:
            assert admin.metrics is not None
            try:
                data = admin.metrics.render()
            except TimeoutError:
                reason = f"the event loop did not answer within {CALL_TIMEOUT_S} s"
                return self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": reason})
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_DELETE(self) -> None:
            if self._path() != "/v1/faults":
                return self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})
            if self._faults_refused():
                return None
            self._send(HTTPStatus.OK, {"cleared": admin.on_loop(admin.faults.clear)})

        def do_POST(self) -> None:
            if self._path() != "/v1/faults":
                return self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})
            if self._faults_refused():
                return None
            try:
                specs = self._json_body()
            except ValueError as exc:
                return self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            if isinstance(specs, dict):
                specs = [specs]
            if not isinstance(specs, list):
                return self._send(
                    HTTPStatus.BAD_REQUEST, {"error": "Send a fault object or a list of them"}
                )

            def arm() -> list[dict[str, Any]]:
                # All or nothing: a bad fault in the list arms none of them.
                armed = []
                try:
                    for spec in specs:
                        armed.append(admin.faults.add(spec))
                except FaultSpecError:
                    for fault in armed:
                        admin.faults.remove(fault.id)
                    raise
                return [fault.as_json() for fault in armed]

            try:
                armed = admin.on_loop(arm)
            except FaultSpecError as exc:
                log.warning("Refused fault from %s: %s", self.client_address[0], exc)
                return self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            self._send(HTTPStatus.CREATED, {"armed": armed})

        def _path(self) -> str:
            return self.path.split("?", 1)[0].rstrip("/")

        def _timeout_s(self) -> float:
            """`?timeout_ms=N`: how long the loop may take to answer a probe."""
            query = parse_qs(urlsplit(self.path).query)
            if "timeout_ms" not in query:
                return LIVE_TIMEOUT_S
            raw = query["timeout_ms"][-1]
            try:
                timeout_ms = int(raw)
            except ValueError:
                timeout_ms = 0
            if not 0 < timeout_ms <= 60_000:
                raise ValueError(f"timeout_ms must be 1-60000 milliseconds, got {raw!r}")
            return timeout_ms / 1000

        def _json_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                raise ValueError("Body too large")
            raw = self.rfile.read(length)
            try:
                return json.loads(raw or b"null")
            except json.JSONDecodeError as exc:
                raise ValueError(f"Body is not JSON: {exc}") from None

        def _send(
            self, status: HTTPStatus, body: Any, headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body, indent=1).encode() + b"\n"
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.client_address[0], format % args)

    return Handler
