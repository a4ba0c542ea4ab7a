"""README's install lines, run as written on a copy of this checkout: a venv of its own,
`pip install .` (which builds with the setuptools pyproject asks for), the `brook` script
serving clients, and the wheel line (every package in the wheel, the pytest plugin's entry
point too). Needs PyPI, as installing does."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import zipfile
from pathlib import Path

from confluent_kafka import Consumer, Producer

from brook.broker.testing import free_port, wait_for_port

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def _install_block() -> list[str]:
    section = README.split("## Two commands", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def _copy_checkout(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _sh(line: str, cwd: Path) -> None:
    ran = subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"


def test_the_install_lines_work_as_written(tmp_path):
    checkout = tmp_path / "brook"
    _copy_checkout(checkout)
    install, serve, *_ = _install_block()
    assert install == "python3 -m venv .venv && .venv/bin/pip install ."
    assert serve.startswith(".venv/bin/brook serve ")
    _sh(install, checkout)

    # The serve line as written, on a free port of 127.0.0.1 rather than every interface's
    # 9092 (a later --override wins).
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log_file:
        broker = subprocess.Popen(
            ["bash", "-c", f"exec {serve} --override listeners=PLAINTEXT://127.0.0.1:{port}"],
            cwd=checkout,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process=broker)
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("installed", value=b"it serves", partition=0)
        assert producer.flush(15) == 0
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["installed"])
        message = None
        while message is None:
            message = consumer.poll(1.0)
        consumer.close()
        assert message.value() == b"it serves"
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(30) == 0, log_path.read_text()
    assert (checkout / "brook-data" / "installed-0").is_dir()

    # The wheel line, and what the wheel holds.
    wheel_line = re.search(r"`(\.venv/bin/pip wheel [^`]*)`", README).group(1)
    _sh(wheel_line, checkout)
    (wheel,) = (checkout / "dist").glob("brook_broker-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = ("protocol", "storage", "coordinator_state", "broker", "broker/apis", "spark")
    for package in packages:
        assert f"brook/{package}/__init__.py" in names, package
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert (
        "brook = brook.broker.testing.pytest_plugin" in text and "brook.broker.entry:main" in text
    )
