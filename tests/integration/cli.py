"""Run the real `brook` console script as a subprocess, for the CLI tool tests."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from .processes import BROOK, clean_env


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def brook(*args: str, timeout: float = 60) -> Ran:
    """`brook ARGS...` to completion, stdout and stderr kept apart."""
    done = subprocess.run(
        [*BROOK, *args],
        capture_output=True,
        text=True,
        errors="replace",
        env=clean_env(),
        timeout=timeout,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def assert_one_line_error(ran: Ran, *fragments: str, code: int | None = None) -> None:
    """Failed with a non-zero exit, one readable line on stderr naming `fragments`."""
    assert ran.returncode != 0, ran
    if code is not None:
        assert ran.returncode == code, ran
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
