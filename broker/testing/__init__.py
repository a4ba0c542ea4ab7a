"""Run a Brook broker for tests: in a thread of this process, or as a subprocess.

Both pick a free port on 127.0.0.1 and a data directory given by the caller, and
stop exactly what they started. Both seed and read topics through a real client
(`produce`, `records`, `create_topic`: broker/testing/records.py); `AsyncBroker` is
the thread broker for asyncio tests, started and stopped off the test's event loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..config.broker_config import BrokerConfig
from ..local_ports import free_port
from . import records as testing_records
from .records import ConsumedRecord, Produced, ProduceError, RecordLike

# What a test imports from here: ProduceError too, which `produce` raises.
__all__ = [
    "AsyncBroker",
    "BrokerProcess",
    "BrokerThread",
    "ConsumedRecord",
    "FaultControl",
    "ProduceError",
    "Produced",
    "RecordLike",
    "free_port",
    "wait_for_port",
    "wait_until",
]

START_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 20.0
# Between two looks at the state waited on: often enough not to add latency, seldom
# enough not to hold the GIL against a broker thread (and the clients' threads) that
# must make the change.
WAIT_INTERVAL_S = 0.02

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str = "the condition",
    timeout: float = WAIT_TIMEOUT_S,
    tick: Callable[[], object] | None = None,
    interval: float = WAIT_INTERVAL_S,
) -> T:
    """Ask `condition` (after `tick`, e.g. a consumer's poll) until it gives a true
    value, and return that value; AssertionError naming `what` after `timeout` seconds.

    For waiting on the broker's own state (a watermark, a retention pass, a parked
    fetch, read with BrokerThread.call) rather than sleeping a guessed time; a
    condition that costs more to ask (a request to a container) asks less often
    (`interval`).
    """
    deadline = time.monotonic() + timeout
    while True:
        if tick is not None:
            tick()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def wait_for_port(
    port: int,
    timeout: float = START_TIMEOUT_S,
    process: subprocess.Popen[Any] | None = None,
    log_path: Path | None = None,
) -> None:
    """Return once something listens on `port`; if `process` exits first, raise with the
    end of its log (`log_path`), which says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"broker exited with code {process.returncode} during start" + _log_tail(log_path)
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise TimeoutError(
        f"broker did not listen on port {port} within {timeout} s" + _log_tail(log_path)
    )


def _log_tail(log_path: Path | None, lines: int = 30) -> str:
    if log_path is None:
        return ""
    try:
        tail = log_path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"; the end of {log_path}:\n" + "\n".join(tail)


def broker_overrides(
    port: int, data_dir: Path, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir),
        # A test broker: its tests inject faults (`faults`, or the admin endpoint's).
        "admin.fault.injection.enable": "true",
    }
    overrides.update({key: str(value) for key, value in (extra or {}).items()})
    return overrides


class RecordHelpers:
    """Seed and read back topics of the broker at `self.bootstrap` with a real client."""

    @property
    def bootstrap(self) -> str:
        """host:port of the broker (each kind of broker says where it listens)."""
        raise NotImplementedError

    def produce(
        self,
        topic: str,
        records: Iterable[RecordLike],
        partition: int | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> list[Produced]:
        """Produce records (values; (key, value) pairs; or dicts of key, value, headers,
        partition, timestamp) and wait for the broker to take them; returns where each
        went. A topic that does not exist yet is created as Kafka auto-creates one.
        `config`: more producer configuration (confluent-kafka's names)."""
        return testing_records.produce(self.bootstrap, topic, records, partition, config)

    def records(
        self,
        topic: str,
        partitions: Sequence[int] | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> list[ConsumedRecord]:
        """Every record the topic (or these partitions) holds now, as a consumer reads
        it: partition by partition, in offset order."""
        return testing_records.read_records(self.bootstrap, topic, partitions, isolation_level)

    def create_topic(
        self, name: str, partitions: int = -1, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic (partitions -1: the broker's num.partitions)."""
        testing_records.create_topic(self.bootstrap, name, partitions, config)


class BrokerThread(RecordHelpers):
    """A broker on its own event loop in a daemon thread of this process."""

    def __init__(
        self,
        data_dir: Path,
        overrides: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
        port: int | None = None,
    ) -> None:
        self.clock = clock
        # The PLAINTEXT port: a test that lists more listeners names this one among them.
        self.port = port or free_port()
        self.data_dir = data_dir
        self.config = BrokerConfig.build({}, {}, broker_overrides(self.port, data_dir, overrides))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Any = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_port(self) -> int:
        """The port the admin endpoint listens on, `admin.listener`'s port 0 resolved."""
        if self.broker is None or self.broker.admin is None:
            raise RuntimeError("the admin endpoint is off: set admin.listener (http://HOST:0)")
        port: int = self.broker.admin.port
        return port

    @property
    def admin_url(self) -> str:
        """The admin endpoint's base URL, e.g. http://127.0.0.1:40123 (a wildcard bind
        address reached on loopback)."""
        admin = self.broker.admin if self.broker is not None else None
        host = admin.host if admin is not None else ""
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        scheme = admin.scheme if admin is not None else "http"
        return f"{scheme}://{host}:{self.admin_port}"

    def start(self) -> BrokerThread:
        self._thread = threading.Thread(target=self._run, name="brook-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise TimeoutError("broker thread did not start")
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error
        return self

    def _run(self) -> None:
        import uvloop

        from ..server.broker import Broker

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self.broker = Broker(self.config, self.clock) if self.clock else Broker(self.config)
            try:
                await self.broker.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            stop_asked = asyncio.ensure_future(self._stop.wait())
            stopped_itself = asyncio.ensure_future(self.broker.stop_requested.wait())
            await asyncio.wait({stop_asked, stopped_itself}, return_when=asyncio.FIRST_COMPLETED)
            stop_asked.cancel()
            stopped_itself.cancel()
            await self.broker.stop()

        uvloop.run(main())

    def call(self, function: Any, *args: Any) -> Any:
        """Run a function on the broker's loop (where all its state lives)."""
        assert self.loop is not None

        async def invoke() -> Any:
            return function(*args)

        return asyncio.run_coroutine_threadsafe(invoke(), self.loop).result(30)

    @property
    def faults(self) -> FaultControl:
        """Arm, list and clear faults from a test: `brook_broker.faults.add(api="Produce",
        error="NOT_LEADER_OR_FOLLOWER", count=3)`."""
        return FaultControl(self)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(60)
        self.loop = None


class BrokerProcess(RecordHelpers):
    """`brook serve` as a subprocess, for tests that kill it."""

    def __init__(
        self,
        data_dir: Path,
        overrides: Mapping[str, Any] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.data_dir = data_dir
        self.overrides = broker_overrides(self.port, data_dir, overrides)
        self.log_path = log_path or data_dir.parent / f"broker-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command = [sys.executable, "-m", "brook.broker.cli", "serve"]
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("BROOK_")}
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, env=env
            )
        wait_for_port(self.port, process=self.process, log_path=self.log_path)
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout_s: float = 10.0) -> str:
        """The log once `text` is in it: lines the start logs after the bind may come
        after the port accepts (the kernel accepts as soon as the socket listens)."""
        deadline = time.monotonic() + timeout_s
        while True:
            log_text = self.log_text()
            if text in log_text or time.monotonic() > deadline:
                return log_text
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no clean-shutdown marker."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self, timeout: float = 30) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


class FaultControl:
    """The broker's faults from the test's thread: the same faults and JSON form as the
    admin endpoint (POST/GET/DELETE /v1/faults) and `brook faults`."""

    def __init__(self, broker: BrokerThread) -> None:
        self._broker = broker

    def add(self, **spec: Any) -> dict[str, Any]:
        """Arm one fault; raises FaultSpecError for a fault that cannot be armed."""
        fault = self._broker.call(lambda: self._broker.broker.faults.add(spec))
        result: dict[str, Any] = fault.as_json()
        return result

    def list(self) -> dict[str, Any]:
        """{"armed": [...], "faults": [...]}: what is armed, and every fault since the
        last clear with how often it fired."""
        listing: dict[str, Any] = self._broker.call(lambda: self._broker.broker.faults.listing())
        return listing

    def fired(self, fault_id: int) -> int:
        for fault in self.list()["faults"]:
            if fault["id"] == fault_id:
                return int(fault["fired"])
        raise KeyError(fault_id)

    def clear(self) -> int:
        cleared: int = self._broker.call(lambda: self._broker.broker.faults.clear())
        return cleared


class AsyncBroker:
    """A BrokerThread for asyncio tests: started and stopped in a worker thread, so the
    test's event loop keeps running, and helpers to await. The broker runs on a loop of
    its own, so a test may call blocking clients without stalling it."""

    def __init__(self, data_dir: Path, overrides: Mapping[str, Any] | None = None) -> None:
        self.thread = BrokerThread(data_dir, overrides)

    @property
    def bootstrap(self) -> str:
        return self.thread.bootstrap

    @property
    def port(self) -> int:
        return self.thread.port

    @property
    def admin_port(self) -> int:
        return self.thread.admin_port

    @property
    def admin_url(self) -> str:
        return self.thread.admin_url

    @property
    def faults(self) -> FaultControl:
        return self.thread.faults

    async def start(self) -> AsyncBroker:
        await asyncio.to_thread(self.thread.start)
        return self

    async def stop(self) -> None:
        await asyncio.to_thread(self.thread.stop)

    async def produce(
        self,
        topic: str,
        records: Iterable[RecordLike],
        partition: int | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> list[Produced]:
        records = list(records)
        return await asyncio.to_thread(self.thread.produce, topic, records, partition, config)

    async def records(
        self,
        topic: str,
        partitions: Sequence[int] | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> list[ConsumedRecord]:
        return await asyncio.to_thread(self.thread.records, topic, partitions, isolation_level)

    async def create_topic(
        self, name: str, partitions: int = -1, config: Mapping[str, str] | None = None
    ) -> None:
        await asyncio.to_thread(self.thread.create_topic, name, partitions, config)
