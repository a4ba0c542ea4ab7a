"""Brook's image, built from this checkout and run with podman as README's Docker section
runs it: clients through a host port other than 9092, the health check, a named volume across
restarts, a clean stop, and a bind-mounted directory the broker cannot write.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from brook.broker.testing import free_port
from tests.integration.clients import consume_all, poll_until, produce

from .podman import ULIMITS, Container, Podman, create_volume, run_container, unique_name

DATA_DIR = "/var/lib/brook"
IMAGE_UID = 10001
LISTENING = "listening on PLAINTEXT://0.0.0.0:9092"
KCAT = shutil.which("kcat")


def start_broker(
    podman: Podman,
    image: str,
    containers: list[Container],
    data: str,
    host_port: int,
) -> Container:
    """README's command: the container's 9092 published on `host_port` (on loopback here)
    and advertised as localhost:<host_port>, the data directory on `data`."""
    container = run_container(
        podman,
        image,
        name=unique_name("broker"),
        ports=[f"127.0.0.1:{host_port}:9092"],
        volumes=[f"{data}:{DATA_DIR}"],
        env={"BROOK_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{host_port}"},
    )
    containers.append(container)
    container.wait_for_log(LISTENING)
    return container


class RunningBroker:
    def __init__(self, container: Container, host_port: int) -> None:
        self.container = container
        self.host_port = host_port
        self.bootstrap = f"localhost:{host_port}"


@pytest.fixture(scope="module")
def broker(podman: Podman, image: str) -> Iterator[RunningBroker]:
    """One broker container for the tests that only talk to it."""
    host_port = free_port()
    assert host_port != 9092
    volume = create_volume(podman, unique_name("shared"))
    started: list[Container] = []
    try:
        container = start_broker(podman, image, started, volume, host_port)
        yield RunningBroker(container, host_port)
    finally:
        for container in started:
            container.remove()
        podman("volume", "rm", "--force", volume, check=False)


def kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (./test.sh installs it)")
def test_kcat_produces_and_consumes_through_a_host_port_other_than_9092(
    broker: RunningBroker, topic_name: str
) -> None:
    # The broker hands out the mapped address, not the container's 9092.
    metadata = json.loads(kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic_name))
    assert [b["name"] for b in metadata["brokers"]] == [f"localhost:{broker.host_port}"]

    lines = [f"k{n}:value {n}" for n in range(5)]
    kcat("-b", broker.bootstrap, "-t", topic_name, "-K:", "-P", stdin="\n".join(lines) + "\n")
    out = kcat("-b", broker.bootstrap, "-t", topic_name, "-C", "-e", "-f", "%o %k:%s\n")
    assert out.splitlines() == [f"{n} k{n}:value {n}" for n in range(5)]


def test_confluent_kafka_produces_and_consumes_in_a_group_through_a_host_port(
    broker: RunningBroker, topic_name: str
) -> None:
    messages = [(b"key-%d" % n, b"value-%d" % n) for n in range(20)]
    delivered = produce(broker.bootstrap, topic_name, messages)
    assert [m.offset() for m in delivered] == list(range(20))

    # A group needs FindCoordinator's answer to be reachable too: the mapped port again.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"group-{topic_name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic_name])
        received = poll_until(consumer, lambda out: len(out) >= 20, timeout=30)
        assert [(m.key(), m.value()) for m in received] == messages
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.offset) for tp in committed] == [(topic_name, 20)]
    finally:
        consumer.close()


def test_healthcheck_passes_while_the_broker_listens(broker: RunningBroker, podman: Podman) -> None:
    check = podman("healthcheck", "run", broker.container.name, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    health = broker.container.state()["Health"]
    assert health["Status"] == "healthy", health


def test_broker_is_pid_1_as_uid_10001_and_owns_its_data(broker: RunningBroker) -> None:
    # PID 1 is the broker itself (the entrypoint execs it), so `docker stop`'s SIGTERM
    # reaches it; it runs as the image's user.
    command = broker.container.exec("cat", "/proc/1/cmdline").stdout.split("\0")
    assert command[-3:] == ["/opt/brook/bin/brook", "serve", ""], command
    status = broker.container.exec("cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uids == [str(IMAGE_UID)] * 4
    files = broker.container.exec("find", DATA_DIR, "-mindepth", "1").stdout.split()
    assert f"{DATA_DIR}/meta.properties" in files
    foreign = broker.container.exec("find", DATA_DIR, "!", "-user", str(IMAGE_UID)).stdout
    assert foreign == ""


def test_healthcheck_fails_when_nothing_listens(
    podman: Podman, image: str, containers: list[Container]
) -> None:
    # The image with something else than the broker running: the check must see no port.
    container = run_container(podman, image, name=unique_name("idle"), command=["sleep", "600"])
    containers.append(container)
    check = podman("healthcheck", "run", container.name, check=False)
    assert check.returncode != 0
    assert "unhealthy" in check.stdout


def test_data_survives_restarts_on_a_named_volume_and_stop_is_clean(
    podman: Podman, image: str, containers: list[Container], volume: str, topic_name: str
) -> None:
    host_port = free_port()
    bootstrap = f"localhost:{host_port}"
    container = start_broker(podman, image, containers, volume, host_port)
    messages = [(b"k%d" % n, b"kept %d" % n) for n in range(50)]
    produce(bootstrap, topic_name, messages)

    # `docker stop`: SIGTERM, and the broker exits 0 well before the SIGKILL (137).
    assert container.stop(timeout_s=30) == 0
    assert container.logs().rstrip().endswith("Broker 0 stopped cleanly")

    # The same container again (`docker restart`): no recovery, the records are there.
    container.start()
    logs = container.wait_for_log(LISTENING, count=2)
    after_restart = logs.rsplit("Broker 0 stopped cleanly", 1)[1]
    assert f"partition(s) in {DATA_DIR} after a clean shutdown" in after_restart
    assert "unclean" not in after_restart
    received = consume_all(bootstrap, topic_name, 50)
    assert [(m.key(), m.value()) for m in received] == messages

    # A new container on the same named volume (an upgrade): the records are still there.
    assert container.stop() == 0
    container.remove()
    replacement = start_broker(podman, image, containers, volume, host_port)
    assert "after a clean shutdown" in replacement.logs()
    received = consume_all(bootstrap, topic_name, 50)
    assert [(m.key(), m.value()) for m in received] == messages


def chown(podman: Podman, owner: str, path: Path, recursive: bool = True) -> None:
    """chown as the container sees the ids: as root plainly; rootless, in podman's user
    namespace, where the container's uids are mapped."""
    if os.geteuid() != 0:
        podman("unshare", "chown", *(["-R"] if recursive else []), owner, str(path))
        return
    uid, gid = map(int, owner.split(":"))
    os.chown(path, uid, gid)
    for parent, dirs, files in os.walk(path) if recursive else ():
        for name in dirs + files:
            os.chown(os.path.join(parent, name), uid, gid)


def test_bind_mount_owned_by_another_uid_is_refused_with_what_to_do(
    podman: Podman, image: str, containers: list[Container], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    chown(podman, "4321:4321", data)
    mount = f"{data}:{DATA_DIR}"
    refused = run_container(podman, image, name=unique_name("bind"), volumes=[mount])
    containers.append(refused)
    assert refused.wait_for_exit() == 1
    logs = refused.logs()
    assert f"the data directory {DATA_DIR} is not writable by uid {IMAGE_UID}" in logs
    assert f"{DATA_DIR} is owned by uid:gid 4321:4321" in logs
    # README's three ways out, each followed below or in the named-volume test.
    assert "named volume instead" in logs and f"-v brook-data:{DATA_DIR}" in logs
    assert f"chown -R {IMAGE_UID}:{IMAGE_UID}" in logs
    assert "docker run --user 4321:4321" in logs
    assert "Traceback" not in logs and "brook.broker" not in logs  # the broker never started
    assert list(data.iterdir()) == []

    # Run as the directory's owner: the broker starts and writes its files there.
    as_owner = run_container(
        podman, image, name=unique_name("bind"), volumes=[mount], user="4321:4321"
    )
    containers.append(as_owner)
    as_owner.wait_for_log(LISTENING)
    assert as_owner.stop() == 0
    assert (data / "meta.properties").exists()

    # The directory handed to the image's user, but the files in it left as they were (by a
    # container run as another user): the first such file is named.
    chown(podman, f"{IMAGE_UID}:{IMAGE_UID}", data, recursive=False)
    refused_again = run_container(podman, image, name=unique_name("bind"), volumes=[mount])
    containers.append(refused_again)
    assert refused_again.wait_for_exit() == 1
    logs = refused_again.logs()
    assert f"the data directory {DATA_DIR} is not writable by uid {IMAGE_UID}" in logs
    assert "is owned by uid:gid 4321:4321" in logs
    assert f"  {DATA_DIR}/" in logs  # a file inside is named, not the directory

    # README's chown -R to the image's uid: the broker starts on the data the other user left.
    chown(podman, f"{IMAGE_UID}:{IMAGE_UID}", data)
    host_port = free_port()
    container = start_broker(podman, image, containers, str(data), host_port)
    assert "Generated cluster id" not in container.logs()  # it kept the directory's identity


def test_every_data_directory_is_checked(
    podman: Podman, image: str, containers: list[Container], tmp_path: Path
) -> None:
    """BROOK_LOG_DIRS lists several directories, as log.dirs does: an unwritable second one
    is refused too, by name."""
    more = tmp_path / "more"
    more.mkdir()
    chown(podman, "4321:4321", more)
    refused = run_container(
        podman,
        image,
        name=unique_name("dirs"),
        volumes=[f"{more}:/srv/more"],
        env={"BROOK_LOG_DIRS": f"{DATA_DIR},/srv/more"},
    )
    containers.append(refused)
    assert refused.wait_for_exit() == 1
    assert f"the data directory /srv/more is not writable by uid {IMAGE_UID}" in refused.logs()


def test_runtime_image_has_no_pip_or_setuptools(podman: Podman, image: str) -> None:
    found = podman(
        "run",
        "--rm",
        *ULIMITS,
        "--entrypoint",
        "python",
        image,
        "-c",
        "import importlib.util as u, shutil;"
        " print([m for m in ('pip', 'setuptools') if u.find_spec(m)],"
        " [p for p in ('pip', 'pip3', 'easy_install') if shutil.which(p)])",
    )
    assert found.stdout.strip() == "[] []"
