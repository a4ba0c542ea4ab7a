"""scripts/make-venv.sh, which test.sh runs first: it makes the venv, leaves a good one
alone, and makes again one that a failed first run left with a python but no pip (on
Debian without python3-venv), so that the next ./test.sh works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "make-venv.sh"


def _run(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), str(venv)], capture_output=True, text=True, timeout=120, check=False
    )


def _has_pip(venv: Path) -> bool:
    probe = [str(venv / "bin" / "python"), "-m", "pip", "--version"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def test_a_half_made_venv_is_made_again(tmp_path):
    venv = tmp_path / "venv"
    # What `python3 -m venv` leaves when ensurepip is missing: a python, no pip.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert not _has_pip(venv)
    ran = _run(venv)
    assert ran.returncode == 0, ran.stderr
    assert "no pip" in ran.stderr and "making it again" in ran.stderr
    assert _has_pip(venv)


def test_a_missing_venv_is_made_and_a_good_one_left_alone(tmp_path):
    venv = tmp_path / "venv"
    first = _run(venv)
    assert first.returncode == 0, first.stderr
    assert _has_pip(venv)
    marker = venv / "kept"
    marker.write_text("a good venv is not made again\n")
    again = _run(venv)
    assert (again.returncode, again.stderr) == (0, "")
    assert marker.exists()
