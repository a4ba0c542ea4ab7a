"""How `brook cluster restart N` reaches the running `brook cluster`.

The running cluster listens on a Unix socket beside its data (<data-dir>/control.sock,
or under the temporary directory when that path is too long for a socket). A request
is one line, `restart <id>`; the answer is the lines the cluster prints while it acts,
the last `ok ...` or `error ...`. The broker it starts is its own child, so Ctrl-C on
the cluster stops it with the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

SOCKET_NAME = "control.sock"
# sun_path holds 108 bytes on Linux (104 on macOS), its terminating NUL included.
MAX_SOCKET_PATH = 100
REQUEST_TIMEOUT_S = 180.0


def socket_path(data_dir: Path) -> Path:
    path = data_dir.resolve() / SOCKET_NAME
    if len(str(path).encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"brook-cluster-{digest}.sock"


class ControlServer:
    """The running cluster's end: accepts one request at a time, between its checks of
    the brokers (`handle` answers it, writing lines through `say`)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = socket_path(data_dir)
        self.path.unlink(missing_ok=True)  # left by a cluster that was killed
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        self._sock.listen()

    def serve_one(
        self, timeout_s: float, handle: Callable[[str, Callable[[str], None]], bool]
    ) -> None:
        """Wait up to `timeout_s` for a request and answer it."""
        self._sock.settimeout(timeout_s)
        try:
            connection, _ = self._sock.accept()
        except (TimeoutError, InterruptedError):
            return
        with connection:
            connection.settimeout(10)
            try:
                request = connection.makefile("r", encoding="utf-8").readline().strip()
            except OSError:
                return

            def say(line: str) -> None:
                # The asking command may have gone away: the cluster carries on.
                with contextlib.suppress(OSError):
                    connection.sendall(f"{line}\n".encode())

            ok = handle(request, say)
            say("ok" if ok else "error")

    def close(self) -> None:
        self._sock.close()
        self.path.unlink(missing_ok=True)


def send(data_dir: Path, request: str, out: Callable[[str], None]) -> bool:
    """Send one request to the cluster running on `data_dir`, passing each line of its
    answer to `out`; True when it succeeded. ConnectionError when no cluster runs there."""
    path = socket_path(data_dir)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(REQUEST_TIMEOUT_S)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise ConnectionError(f"no `brook cluster` is running on {data_dir}") from None
        sock.sendall(f"{request}\n".encode())
        last = ""
        for line in sock.makefile("r", encoding="utf-8"):
            line = line.rstrip("\n")
            if line in ("ok", "error"):
                last = line
                break
            out(line)
        return last == "ok"
