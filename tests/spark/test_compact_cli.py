"""`brook compact` as a user runs it: a subprocess, with its own Spark (local[2]), and the
same job through spark-submit; the refusals, which come before any Spark starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import brook.broker.tools.compact as compact_tool
from brook.broker.testing import BrokerThread

from .compact_source import (
    ORDERS,
    PARTITIONS,
    Source,
    active_segment_base,
    expected_after_compaction,
    orders_records,
    write_source,
)
from .test_compact import fingerprint

CLI = [sys.executable, "-m", "brook.broker.cli", "compact"]
# A Spark of its own starts a JVM: tens of seconds on a busy machine.
SPARK_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return write_source(tmp_path_factory.mktemp("compact-cli") / "data")


def run(args: list[str | Path], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(
        [str(arg) for arg in args], capture_output=True, text=True, timeout=timeout, env=env
    )


def assert_compacted(source: Source, out: Path) -> None:
    for p in range(PARTITIONS):
        active = active_segment_base(out, ORDERS, p)
        assert orders_records(out, p) == expected_after_compaction(source, p, active)


def test_a_dir_a_live_broker_holds_is_refused(tmp_path):
    data = tmp_path / "data"
    broker = BrokerThread(data).start()

    def untouched() -> dict[str, tuple[int, str]]:
        # Not the broker's checkpoint files: it writes them on its own schedule.
        return {k: v for k, v in fingerprint(data).items() if not k.endswith("-checkpoint")}

    try:
        before = untouched()
        ran = run([*CLI, data, "--out", tmp_path / "out"])
        assert ran.returncode == 1, ran.stderr
        assert f"brook compact: error: {data} is in use by a running broker" in ran.stderr
        assert "Traceback" not in ran.stderr
        assert not (tmp_path / "out").exists()
        assert untouched() == before
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--topics", "orders,nope"], 1, "No partition of nope in"),
        (["--topics", "events"], 1, "cleanup.policy of events does not include compact"),
        (
            ["--override", "log.cleaner.dedupe.buffer.size=lots"],
            2,
            "Invalid value 'lots' for configuration log.cleaner.dedupe.buffer.size",
        ),
    ],
)
def test_bad_arguments_are_refused_before_spark_starts(source, tmp_path, extra, code, message):
    out = tmp_path / "out"
    ran = run([*CLI, source.data, "--out", out, *extra])
    assert ran.returncode == code, ran.stderr
    assert message in ran.stderr
    assert "Traceback" not in ran.stderr and "Spark" not in ran.stderr
    assert not out.exists()


def test_output_dirs_that_are_not_empty_or_inside_the_input_are_refused(source, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep-me").write_text("mine")
    ran = run([*CLI, source.data, "--out", out])
    assert ran.returncode == 1
    assert f"The output directory {out} is not empty" in ran.stderr
    assert [p.name for p in out.iterdir()] == ["keep-me"]
    inside = source.data / "compacted"
    ran = run([*CLI, source.data, "--out", inside])
    assert ran.returncode == 1
    assert f"The output directory {inside} must lie outside {source.data}" in ran.stderr
    assert not inside.exists()
    missing = tmp_path / "missing"
    ran = run([*CLI, missing, "--out", out])
    assert ran.returncode == 2 and f"{missing} is not a directory" in ran.stderr


def test_a_directory_that_is_not_a_log_dir_is_refused(tmp_path):
    """As `brook audit` refuses it: compacting it would write an empty log dir with a
    clean-shutdown marker, which a broker would serve as one that lost every topic."""
    home = tmp_path / "home"
    (home / "photos").mkdir(parents=True)
    (home / "notes.txt").write_text("not a log dir")
    out = tmp_path / "out"
    ran = run([*CLI, home, "--out", out], SPARK_TIMEOUT_S)
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert f"brook compact: error: {home} holds no partition directory" in ran.stderr
    assert "Traceback" not in ran.stderr and "Spark" not in ran.stderr
    assert not out.exists()


def test_brook_compact_with_its_own_spark(source, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    # A Kafka key Brook has no use for is passed over, said once, as `brook serve` does.
    unused = ["--override", "num.network.threads=3"]
    ran = run([*CLI, source.data, "--out", out, "--master", "local[2]", *unused], SPARK_TIMEOUT_S)
    wall = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stderr.count("Passing over 1 key(s) of --override") == 1
    assert "num.network.threads" in ran.stderr
    assert f"Compacting {source.data} into {out}" in ran.stderr
    assert "Spark tasks done" in ran.stderr  # progress while Spark works
    assert f"  {ORDERS}-0: " in ran.stderr
    # The time it reports is the command's wall time, its JVM's start and stop included
    # (all but the interpreter's start and the process's exit, which take a few seconds on
    # a loaded machine: a tenth of the wall time is allowed for them, less than a JVM's
    # start here).
    done = re.search(r"^Done in ([0-9.]+) s: ", ran.stderr, re.M)
    assert done, ran.stderr[-3000:]
    slack = max(2.0, wall / 10)
    assert wall - slack <= float(done.group(1)) <= wall, (float(done.group(1)), wall)
    assert_compacted(source, out)


def test_spark_submit_runs_the_same_job(source, tmp_path):
    out = tmp_path / "out"
    submit = Path(sys.executable).parent / "spark-submit"
    script = compact_tool.__file__
    ran = run(
        [submit, "--master", "local[2]", script, source.data, "--out", out, "--topics", ORDERS],
        SPARK_TIMEOUT_S,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    # spark-submit passes its Python driver's stderr on to its own stdout.
    assert "compacted topics: orders;" in ran.stdout + ran.stderr
    assert_compacted(source, out)
