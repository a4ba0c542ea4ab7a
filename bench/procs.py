"""Start, watch and stop one broker process; nothing here knows which broker it is."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # psutil ships no types (types-psutil is no dependency)

# How often a starting broker is probed, and how long it may take before we give up on it.
POLL_INTERVAL_S = 0.005
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class BrokerStartError(RuntimeError):
    """The broker exited or did not accept connections in time."""


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class BrokerProcess:
    """One broker subprocess with its output in a log file.

    Use it as a context manager: leaving the block always stops the process (and any children it
    spawned), whether the benchmark succeeded, failed or was interrupted.
    """

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None

    def __enter__(self) -> BrokerProcess:
        # Entering an already started broker must not spawn a second, unsupervised one.
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> str:
        """How the process ended, for failure reports (a negative code is the killing signal)."""
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return "still running" if self._proc is not None else "stopped by the bench"
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Start the broker and return seconds from spawn to the first accepted TCP connection."""
        if self._proc is not None:
            raise RuntimeError("broker already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            # Output goes to a file, not a pipe: a pipe nobody reads fills up and stalls the broker.
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        deadline = started + timeout_s
        try:
            while True:
                if accepts_connections(self.port):
                    self.startup_s = time.perf_counter() - started
                    return self.startup_s
                if self._proc.poll() is not None:
                    raise BrokerStartError(
                        f"exited with code {self._proc.returncode} before accepting connections; "
                        f"log tail:\n{self.log_tail()}"
                    )
                if time.perf_counter() > deadline:
                    raise BrokerStartError(
                        f"not accepting connections on port {self.port} after {timeout_s:.0f}s; "
                        f"log tail:\n{self.log_tail()}"
                    )
                time.sleep(POLL_INTERVAL_S)
        except BaseException:
            self.stop()
            raise

    def _tree(self) -> list[psutil.Process]:
        """The broker and any processes it spawned; empty once it is gone."""
        if not self.alive() or self.pid is None:
            return []
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def rss_bytes(self) -> int | None:
        """Resident memory of the broker and any processes it spawned, or None if it is gone."""
        total = self._tree_total(lambda proc: proc.memory_info().rss)
        return None if total is None else int(total)

    def cpu_seconds(self) -> float | None:
        """User + system CPU time the broker (and its children) used so far, or None if gone."""

        def used(proc: psutil.Process) -> float:
            times = proc.cpu_times()
            return float(times.user + times.system)

        return self._tree_total(used)

    def _tree_total(self, measure: Callable[[psutil.Process], float]) -> float | None:
        """`measure` summed over the broker and its children (one that exits meanwhile
        adds nothing), or None once the broker is gone."""
        procs = self._tree()
        if not procs:
            return None
        total = 0.0
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += measure(proc)
        return total

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean shutdown (the failover bench)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, then SIGKILL after a timeout; only this process and its own descendants."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        children: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            children = psutil.Process(proc.pid).children(recursive=True)
        try:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout_s)
            # Children we saw before the stop that outlived their parent are ours too.
            for child in children:
                with contextlib.suppress(psutil.Error):
                    child.terminate()
            _, still_alive = psutil.wait_procs(children, timeout=timeout_s)
        except BaseException:
            # Ctrl-C or SIGTERM while we wait for a graceful stop: the broker must not outlive
            # us (nor see its data dir deleted under it), so kill everything now, then go on
            # with the interruption.
            if proc.poll() is None:
                proc.kill()
            _kill_now(children)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout_s)
            raise
        _kill_now(still_alive)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _kill_now(procs: Iterable[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def scrubbed_env(drop_prefixes: Sequence[str], drop_names: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment minus variables that would silently reconfigure a broker."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in drop_names and not key.startswith(tuple(drop_prefixes))
    }
