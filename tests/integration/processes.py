"""`brook serve` as real subprocesses for the process-level tests: start, kill, restart,
run the CLI to completion, and read what a broker left on disk.

Every process a test starts is tracked here and stopped at teardown, by its own pid.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from brook.broker.testing import BrokerProcess, wait_for_port

from .clients import poll_until

# The console script beside this interpreter (a venv's bin/); else the module, which is
# what the script runs.
_SCRIPT = Path(sys.executable).with_name("brook")
BROOK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "brook.broker.cli"]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without BROOK_* (they are configs), plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("BROOK_")}
    env.update(extra or {})
    return env


class ServeProcess(BrokerProcess):
    """BrokerProcess through the `brook` console script, with extra arguments (e.g.
    --config) and BROOK_* environment variables; the test's listener and data dir are
    still passed as --override."""

    def __init__(
        self,
        data_dir: Path,
        overrides: Mapping[str, Any] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        limits: Mapping[int, tuple[int, int]] | None = None,
        test_listener: bool = True,
    ) -> None:
        super().__init__(data_dir, overrides, port=port, log_path=log_path)
        if not test_listener:
            # The properties file in `args` sets the listeners and log.dirs itself (the
            # port must then be the one it listens on).
            self.overrides = {key: str(value) for key, value in (overrides or {}).items()}
        self.args = list(args)
        self.env = dict(env or {})
        self.limits = dict(limits or {})

    def start(self) -> ServeProcess:
        command = [*BROOK, "serve", *self.args]
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        limits = self.limits

        def apply_limits() -> None:
            for which, (soft, hard) in limits.items():
                resource.setrlimit(which, (soft, hard))

        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=clean_env(self.env),
                preexec_fn=apply_limits if limits else None,
            )
        wait_for_port(self.port, process=self.process, log_path=self.log_path)
        return self


class Brokers:
    """The broker subprocesses of one test; `stop_all()` ends every one still running."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data_dir = root / "data"
        self.started: list[ServeProcess] = []

    def start(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        data_dir: Path | None = None,
        port: int | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        limits: Mapping[int, tuple[int, int]] | None = None,
        test_listener: bool = True,
    ) -> ServeProcess:
        """`limits`: resource limits (resource.RLIMIT_* -> (soft, hard)) of the process.
        `test_listener=False`: no listener or data dir of the test's own, for a properties
        file in `args` that sets them (then `port` is where that file listens)."""
        # One log file per start, so a test reads what exactly this run logged.
        log_path = self.root / f"broker-run-{len(self.started) + 1}.log"
        broker = ServeProcess(
            data_dir or self.data_dir,
            overrides,
            port,
            log_path,
            args=args,
            env=env,
            limits=limits,
            test_listener=test_listener,
        )
        self.started.append(broker)
        broker.start()
        return broker

    def restart(
        self, previous: BrokerProcess, overrides: Mapping[str, Any] | None = None
    ) -> ServeProcess:
        """A new process on the same data dir and port as `previous` (which must be down)."""
        assert previous.process is not None and previous.process.poll() is not None
        return self.start(overrides, data_dir=previous.data_dir, port=previous.port)

    def stop_all(self) -> None:
        for broker in self.started:
            process = broker.process
            if process is not None and process.poll() is None:
                broker.stop(timeout=10)


def stop_with(broker: BrokerProcess, signum: int, timeout: float = 30) -> int:
    """Send `signum` to the broker and wait for its exit code."""
    assert broker.process is not None
    broker.process.send_signal(signum)
    try:
        return broker.process.wait(timeout)
    except subprocess.TimeoutExpired:
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait(10)
        raise


@dataclass
class Finished:
    returncode: int
    output: str


def run_brook(
    args: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 20
) -> Finished:
    """Run the `brook` CLI to completion; a process still running at `timeout` is killed."""
    process = subprocess.Popen(
        [*BROOK, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=clean_env(env),
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        text = output.decode(errors="replace")
        raise AssertionError(
            f"brook {' '.join(args)} still ran after {timeout} s:\n{text}"
        ) from None
    return Finished(process.returncode, output.decode(errors="replace"))


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(low, high) watermark of each partition, from ListOffsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def read_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    end_offset: int,
    timeout: float = 30,
    start: int = 0,
) -> list[Any]:
    """Every message of a partition from `start` up to `end_offset` (exclusive)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "read-partition",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, partition, start)])

    def reached(out: list[Any]) -> bool:
        return (out[-1].offset() + 1 if out else start) >= end_offset

    try:
        out = poll_until(consumer, reached, timeout)
    finally:
        consumer.close()
    assert reached(out), (
        f"{topic}-{partition}: read {len(out)} messages, expected up to {end_offset}"
    )
    return out
