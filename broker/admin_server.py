"""The admin endpoint (`admin.listener=http://HOST:PORT`, off by default): HTTP+JSON
control of a running broker for tests in any language.

    POST   /v1/faults   arm one fault (a JSON object) or several (a list)
    GET    /v1/faults   what is armed, and every fault since the last clear with its count
    DELETE /v1/faults   clear them all

It is the standard library's threading HTTP server on a thread of its own (no dependency,
nothing imported unless it is turned on); every action runs on the broker's event loop,
where the faults live.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from .faults import FaultRegistry, FaultSpecError

log = logging.getLogger("brook.admin")

T = TypeVar("T")

_URL = re.compile(r"^http://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)/?$")
MAX_BODY_BYTES = 1 << 20
CALL_TIMEOUT_S = 10


def parse_admin_url(url: str) -> tuple[str, int]:
    """(host, port) of an admin.listener value; ValueError when it is not http://HOST:PORT."""
    match = _URL.match(url.strip())
    if not match or int(match["port"]) > 65535:
        raise ValueError(f"expected http://HOST:PORT, got {url!r}")
    return match["host"].strip("[]"), int(match["port"])


class AdminServer:
    def __init__(self, url: str, loop: asyncio.AbstractEventLoop, faults: FaultRegistry) -> None:
        self.host, port = parse_admin_url(url)
        self.loop = loop
        self.faults = faults
        self._server = ThreadingHTTPServer((self.host or "0.0.0.0", port), _handler_for(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="brook-admin", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host or '0.0.0.0'}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        log.info("Admin endpoint on %s (fault injection: /v1/faults)", self.url)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def on_loop(self, action: Callable[[], T]) -> T:
        """Run `action` on the broker's loop and return its result (from a server thread)."""

        async def run() -> T:
            return action()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(CALL_TIMEOUT_S)


def _handler_for(admin: AdminServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "Brook"

        def do_GET(self) -> None:
            if self._path() != "/v1/faults":
                return self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})
            self._send(HTTPStatus.OK, admin.on_loop(admin.faults.listing))

        def do_DELETE(self) -> None:
            if self._path() != "/v1/faults":
                return self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})
            self._send(HTTPStatus.OK, {"cleared": admin.on_loop(admin.faults.clear)})

        def do_POST(self) -> None:
            if self._path() != "/v1/faults":
                return self._send(HTTPStatus.NOT_FOUND, {"error": f"No such path: {self.path}"})
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

        def _json_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                raise ValueError("Body too large")
            raw = self.rfile.read(length)
            try:
                return json.loads(raw or b"null")
            except json.JSONDecodeError as exc:
                raise ValueError(f"Body is not JSON: {exc}") from None

        def _send(self, status: HTTPStatus, body: Any) -> None:
            data = json.dumps(body, indent=1).encode() + b"\n"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.client_address[0], format % args)

    return Handler
