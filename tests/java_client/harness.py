"""The Java client as a test peer: ClientHarness.java, compiled once against the cached
Kafka jars (bench/apache_kafka.py, jvm/pom.xml) and run as one JVM per test module,
which takes JSON commands on stdin and answers each on stdout.

A command names an operation and its arguments (`java.call("produce", config=...,
topic=..., records=[...])`); the answer is what the Java client returned, or a
JavaClientError carrying the exception's class and message, so a test can assert the
error Kafka's own client raised.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.apache_kafka import java_command, java_env, kafka_jars

SOURCE = Path(__file__).with_name("ClientHarness.java")
# Long enough for a transaction across a broker's failover; a test that waits longer
# says so.
CALL_TIMEOUT_S = 120.0


class JavaClientError(Exception):
    def __init__(self, type_: str, message: str, causes: str = "") -> None:
        super().__init__(f"{type_}: {message}{causes}")
        self.type = type_
        self.message = message


def compiled_harness() -> Path:
    """The directory of ClientHarness's classes, compiled on first use into the jar
    cache, beside the jars, under the source's hash (a changed source compiles anew)."""
    libs = kafka_jars()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    classes = libs.parent / f"client-harness-{digest}"
    if (classes / "ClientHarness.class").exists():
        return classes
    staging = Path(tempfile.mkdtemp(prefix="client-harness-", dir=libs.parent))
    subprocess.run(
        ["javac", "-d", str(staging), "-cp", f"{libs}/*", str(SOURCE)],
        check=True,
        env=java_env(),
        capture_output=True,
        text=True,
    )
    try:
        staging.rename(classes)
    except OSError:
        # Another worker compiled the same source first: its classes are as good.
        shutil.rmtree(staging, ignore_errors=True)
    return classes


class JavaClients:
    """One JVM running ClientHarness; stopped by its own pid."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 (kept open for the JVM's life)
        self.process = subprocess.Popen(
            java_command("ClientHarness", heap="384m", classes=compiled_harness()),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=java_env(),
        )
        self._pending = b""  # what stdout gave beyond the last whole line
        self._next_id = 0
        ready = self._read_line(60.0)
        assert json.loads(ready) == {"ready": True}, ready

    def call(self, op: str, timeout: float = CALL_TIMEOUT_S, **arguments: Any) -> Any:
        """Run one operation in the JVM; its result, or JavaClientError."""
        assert self.process.stdin is not None
        self._next_id += 1
        command = {"id": self._next_id, "op": op, **arguments}
        self.process.stdin.write(json.dumps(command).encode() + b"\n")
        self.process.stdin.flush()
        answer = json.loads(self._read_line(timeout))
        assert answer["id"] == self._next_id, answer
        if not answer["ok"]:
            error = answer["error"]
            raise JavaClientError(error["type"], error["message"], error.get("causes", ""))
        return answer["result"]

    def admin(self, config: dict[str, Any], action: str, **arguments: Any) -> Any:
        return self.call("admin", config=config, action=action, **arguments)

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _read_line(self, timeout: float) -> str:
        """One line of the JVM's stdout, read unbuffered (a buffered reader could hold a
        line select() no longer sees)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no answer from the Java client in {timeout} s:\n{self.log_tail()}"
                )
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            chunk = os.read(fd, 1 << 20) if ready else b""
            if (ready and not chunk) or (not ready and self.process.poll() is not None):
                raise RuntimeError(f"the Java client's JVM exited:\n{self.log_tail()}")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the harness closes its members and apps, then exits
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, 9)
                self.process.wait()
        self._log.close()
