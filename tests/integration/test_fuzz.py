"""The fuzzer: valid and damaged requests of every served API version against a broker
subprocess (so that an abort shows), checking after each batch that the process is
alive, a fresh connection is answered, its memory stays bounded, and the segments of a
topic written before the fuzzing keep every byte (fuzz_requests.py says what is sent
and why the protected topic is never named by a request that may change a topic).

    BROOK_FUZZ_EXAMPLES=100000 .venv/bin/python -m pytest -s tests/integration/test_fuzz.py

runs longer (the default suits CI: about a minute). The run is derandomized, so a
failure reproduces by running again; BROOK_FUZZ_SEED=<n> explores other examples, and
a failure prints the seed and writes the frames of the failing batch to a file.
Tracebacks in the broker's log (a handler that failed, a response that could not be
encoded: the connection is closed, the broker goes on) are counted and printed as
findings; BROOK_FUZZ_STRICT=1 fails on them.
"""

from __future__ import annotations

import collections
import hashlib
import os
import resource
import socket
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from .clients import consume_all, create_topic, produce
from .fuzz_requests import POOL, PROTECTED, PROTECTED_CONFIGS, FuzzFrame, fuzz_frames
from .processes import Brokers
from .raw_client import RawClient

EXAMPLES = int(os.environ.get("BROOK_FUZZ_EXAMPLES", "2000"))
SEED = os.environ.get("BROOK_FUZZ_SEED")
STRICT = os.environ.get("BROOK_FUZZ_STRICT") == "1"
BATCH = 100
# A response (or the broker closing) is waited for this long; a request the broker
# parks (a long poll, a join) is then left behind by closing the connection.
ANSWER_WAIT_S = 0.05
# RSS may grow with the topics and groups the fuzzing creates, never without bound.
RSS_LIMIT = 400 << 20
# Partitions a mutated count may still ask for (up to 10,000) run into this first.
OPEN_FILES = 4096
# Any allocation a lying length could trick a reader into (gigabytes) fails under this
# address space on every machine, and shows as the process ending.
ADDRESS_SPACE = 4 << 30


class Harness:
    def __init__(self, broker, data_dir: Path, target_port: int | None = None) -> None:
        self.broker = broker
        self.data_dir = data_dir
        # Where the frames go (a SASL listener, say); the checks use the broker's port.
        self.target_port = target_port or broker.port
        self.process = psutil.Process(broker.process.pid)
        self.protected_files = self._protected_hashes()
        segments = [name for name in self.protected_files if name.endswith(".log")]
        assert len(segments) == 2, f"no segments of {PROTECTED} to watch: {segments}"
        self.batch: list[FuzzFrame] = []
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.sent = 0
        self.peak_rss = self.process.memory_info().rss
        self.started = time.monotonic()

    def _protected_hashes(self) -> dict[str, str]:
        # Producer-state snapshots are left out: a read may load the partition's producer
        # state and snapshot it (a copy of what the log holds), which changes no data.
        return {
            str(path.relative_to(self.data_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.data_dir.glob(f"{PROTECTED}-*/*"))
            if path.is_file() and path.suffix != ".snapshot"
        }

    def send(self, frame: FuzzFrame) -> None:
        self.batch.append(frame)
        try:
            sock = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError as exc:
            self._down(f"a new connection failed ({exc!r})")
        with sock:
            sock.settimeout(ANSWER_WAIT_S)
            try:
                sock.sendall(frame.wire)
                answer = sock.recv(4)
            except TimeoutError:
                self.outcomes["no answer yet"] += 1
            except ConnectionError:
                self.outcomes["closed"] += 1
            else:
                self.outcomes["answered" if answer else "closed"] += 1
        self.sent += 1
        if self.broker.process.poll() is not None:
            self._down("it is not running")
        if len(self.batch) >= BATCH:
            self.check()

    def check(self) -> None:
        """The invariants, after each batch."""
        if self.broker.process.poll() is not None:
            self.fail(f"the broker exited with {self.broker.process.returncode}")
        try:
            with RawClient(self.broker.port) as client:
                response = client.request(
                    ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
                )
            assert response.error_code == 0
        except Exception as exc:
            self.fail(f"a fresh connection was not answered: {exc!r}")
        rss = self.process.memory_info().rss
        self.peak_rss = max(self.peak_rss, rss)
        if rss > RSS_LIMIT:
            self.fail(f"broker RSS {rss >> 20} MiB is over {RSS_LIMIT >> 20} MiB")
        if self._protected_hashes() != self.protected_files:
            self.fail(f"the segments of {PROTECTED} changed")
        self.batch.clear()

    def _down(self, what: str) -> None:
        """The broker went away: name the frames sent last, the culprit among them."""
        try:
            code = self.broker.process.wait(10)
        except Exception:
            code = None
        # The kernel accepts a connection or two while a process dies: the culprit is
        # among the last few frames (hypothesis may replay the last one once more).
        last = "\n".join(dict.fromkeys(str(frame) for frame in self.batch[-5:]))
        self.fail(f"{what}; the broker exited with {code}; the last frames sent:\n{last}")

    def fail(self, reason: str) -> None:
        dump = self.data_dir.parent / "fuzz-failing-batch.txt"
        dump.write_text("\n".join(str(frame) for frame in self.batch) + "\n")
        pytest.fail(
            f"{reason}\nseed: {SEED or 'derandomized'}; after {self.sent} requests; the"
            f" {len(self.batch)} frames of this batch (api, version, mutation, bytes) are in"
            f" {dump}\nbroker log tail:\n{self.broker.log_text()[-3000:]}",
            pytrace=False,
        )


def _tracebacks(log: str) -> collections.Counter[str]:
    """The exception of every traceback in the broker's log (a failed handler, a response
    that could not be encoded), counted."""
    found: collections.Counter[str] = collections.Counter()
    lines = log.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            ending = next(
                (later for later in lines[number + 1 :] if later and not later[0].isspace()),
                "?",
            )
            found[ending[:160]] += 1
    return found


@pytest.fixture
def harness(tmp_path):
    pool = Brokers(tmp_path)
    try:
        broker = pool.start(
            {"group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "true"},
            limits={
                resource.RLIMIT_NOFILE: (OPEN_FILES, OPEN_FILES),
                resource.RLIMIT_AS: (ADDRESS_SPACE, ADDRESS_SPACE),
            },
        )
        create_topic(broker.bootstrap, PROTECTED, partitions=2, config=PROTECTED_CONFIGS)
        for partition in (0, 1):
            produce(
                broker.bootstrap,
                PROTECTED,
                [(b"k%d" % i, b"protected %d" % i) for i in range(50)],
                partition=partition,
            )
        for name in POOL:
            create_topic(broker.bootstrap, name)
            produce(broker.bootstrap, name, [(b"k", b"pool")])
        yield Harness(broker, broker.data_dir)
    finally:
        pool.stop_all()


def test_fuzz(harness, capsys):
    fuzz_settings = settings(
        max_examples=EXAMPLES,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # no shrinking: the broker's state moves on anyway
        suppress_health_check=list(HealthCheck),
    )

    @fuzz_settings
    @given(fuzz_frames())
    def send_one(frame: FuzzFrame) -> None:
        harness.send(frame)

    if SEED is not None:
        send_one = seed(int(SEED))(send_one)
    send_one()
    harness.check()
    elapsed = time.monotonic() - harness.started

    # The protected topic still reads back whole through a real client.
    messages = consume_all(harness.broker.bootstrap, PROTECTED, 50, partition=1)
    assert [m.value() for m in messages] == [b"protected %d" % i for i in range(50)]

    failures = _tracebacks(harness.broker.log_text())
    with capsys.disabled():
        print(
            f"\nfuzz: {harness.sent} requests in {elapsed:.1f} s"
            f" ({dict(harness.outcomes)}), peak broker RSS {harness.peak_rss >> 20} MiB,"
            f" {sum(failures.values())} tracebacks in the broker's log"
        )
        for failure, count in failures.most_common():
            print(f"  {count:5d} x {failure}")
    assert harness.sent >= EXAMPLES
    if STRICT:
        assert not failures, failures
