"""tests/cpu_profile.py charges a test with the CPU of the processes it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cpu_profile import report

ROOT = Path(__file__).resolve().parent.parent
BUSY_TEST = """
import subprocess, sys

def test_busy_child():
    # Half a CPU second in a child process, none in the test's own: the child spins until
    # its own CPU time says so (a fixed sum took 0.2 s on a fast hour of this machine).
    spin = "import time\\nwhile time.process_time() < 0.5: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)

def test_idle():
    pass
"""


def test_a_child_process_cpu_is_charged_to_its_test(tmp_path: Path) -> None:
    (tmp_path / "test_busy.py").write_text(BUSY_TEST)
    profile = tmp_path / "cpu.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.cpu_profile",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_busy.py"),
        ],
        cwd=ROOT,
        # Not an xdist worker, though this test may run in one (whose name it would take).
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"},
            "BROOK_CPU_PROFILE": str(profile),
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    entries = [json.loads(line) for line in profile.read_text().splitlines()]
    calls = {e["test"].rsplit("::", 1)[1]: e["cpu_s"] for e in entries if e["phase"] == "call"}
    assert calls["test_busy_child"] > 0.4
    assert calls["test_idle"] < 0.1
    assert {e["worker"] for e in entries} == {"main"}  # no xdist here
    assert all(e["start"] <= e["stop"] for e in entries)
    busy = next(
        e for e in entries if e["test"].endswith("test_busy_child") and e["phase"] == "call"
    )
    assert busy["stop"] - busy["start"] > 0.1  # the child's run, on the wall clock too
    text = report(profile)
    assert "test_busy.py" in text and "workers, busy seconds" in text
