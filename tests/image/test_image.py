"""Brook's image, built from this checkout and run with podman as README's Docker section
runs it: clients through a host port other than 9092, clients in other containers of a
network through the second listener, the health check, a named volume across restarts, a
clean stop, and a bind-mounted directory the broker cannot write.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from brook.broker.testing import free_port
from tests.integration.clients import consume_all, poll_until, produce

from .podman import (
    OWNER_LABEL,
    ULIMITS,
    Container,
    Podman,
    create_volume,
    run_container,
    unique_name,
)

DATA_DIR = "/var/lib/brook"
IMAGE_UID = 10001
LISTENING = "listening on PLAINTEXT://0.0.0.0:9092, DOCKER://0.0.0.0:29092"
NETWORK_CLIENT = Path(__file__).with_name("network_client.py")
KCAT = shutil.which("kcat")


def start_broker(
    podman: Podman,
    image: str,
    containers: list[Container],
    data: str,
    host_port: int,
) -> Container:
    """README's command: the container's 9092 published on `host_port` (on loopback here)
    and advertised as localhost:<host_port> (the DOCKER listener as `brook`, which only
    containers on a network with it would reach), the data directory on `data`."""
    container = run_container(
        podman,
        image,
        name=unique_name("broker"),
        ports=[f"127.0.0.1:{host_port}:9092"],
        volumes=[f"{data}:{DATA_DIR}"],
        env={"BROOK_ADVERTISED_LISTENERS": advertising(host_port, "brook")},
    )
    containers.append(container)
    container.wait_for_log(LISTENING)
    return container


def advertising(host_port: int, network_name: str) -> str:
    return f"PLAINTEXT://localhost:{host_port},DOCKER://{network_name}:29092"


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


def _python_client(network: str, *options: str) -> tuple[str, ...]:
    """`podman run` of a throw-away client container (Python, the image's) on `network`,
    labelled as this test run's: its arguments up to the image."""
    return (
        "run",
        "--rm",
        "--name",
        unique_name("client"),
        "--label",
        f"{OWNER_LABEL}={os.getpid()}",
        *ULIMITS,
        "--network",
        network,
        *_client_library(),
        *options,
        "--entrypoint",
        "python",
    )


def _client_library() -> tuple[str, ...]:
    """The image holds no Kafka client library (the broker and its tools use none), so a
    client container gets the tests' own confluent-kafka (a manylinux wheel, for the
    image's CPython 3.11), mounted read-only onto its PYTHONPATH."""
    import confluent_kafka

    package = Path(confluent_kafka.__file__).parent
    site = "/run/brook-tests/site"
    options = ["--volume", f"{package}:{site}/confluent_kafka:ro"]
    libraries = package.with_name("confluent_kafka.libs")  # the wheel's own librdkafka
    if libraries.is_dir():
        options += ["--volume", f"{libraries}:{site}/confluent_kafka.libs:ro"]
    return (*options, "--env", f"PYTHONPATH={site}")


def network_metadata(podman: Podman, image: str, network: str, bootstrap: str) -> list[str]:
    """The brokers that a client in a container on `network` is told of by `bootstrap`."""
    code = (
        "import json, sys; from confluent_kafka.admin import AdminClient;"
        " metadata = AdminClient({'bootstrap.servers': sys.argv[1]}).list_topics(timeout=60);"
        " print(json.dumps(sorted(f'{b.host}:{b.port}' for b in metadata.brokers.values())))"
    )
    result = podman(*_python_client(network), image, "-c", code, bootstrap, timeout=300)
    brokers: list[str] = json.loads(result.stdout)
    return brokers


def run_network_client(
    podman: Podman, image: str, network: str, bootstrap: str, topic: str, produce: int, expect: int
) -> dict[str, Any]:
    """network_client.py in a container of the image beside the broker's, on `network`:
    what it saw, as JSON."""
    script = "/run/brook-tests/network_client.py"
    result = podman(
        *_python_client(network, "--volume", f"{NETWORK_CLIENT}:{script}:ro"),
        image,
        script,
        bootstrap,
        topic,
        str(produce),
        str(expect),
        timeout=300,
    )
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def host_view(bootstrap: str, group: str | None = None) -> tuple[list[str], str | None]:
    """The brokers Metadata lists to a client on the host and, given a group, the
    coordinator FindCoordinator names to it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=30)
    brokers = sorted(f"{broker.host}:{broker.port}" for broker in metadata.brokers.values())
    if group is None:
        return brokers, None
    coordinator = admin.describe_consumer_groups([group])[group].result(timeout=30).coordinator
    return brokers, f"{coordinator.host}:{coordinator.port}"


def test_host_and_network_clients_share_a_topic_each_through_its_own_listener(
    podman: Podman,
    image: str,
    containers: list[Container],
    network: str,
    volume: str,
    topic_name: str,
) -> None:
    """README's compose set-up with a host port other than 9092: the host reaches PLAINTEXT
    through the mapped port, containers on the network reach DOCKER as `brook`, and each is
    handed its own listener's endpoint, for Metadata and FindCoordinator alike."""
    host_port = free_port()
    container = run_container(
        podman,
        image,
        name=unique_name("broker"),
        ports=[f"127.0.0.1:{host_port}:9092"],
        volumes=[f"{volume}:{DATA_DIR}"],
        env={"BROOK_ADVERTISED_LISTENERS": advertising(host_port, "brook")},
        network=network,
        aliases=["brook"],
    )
    containers.append(container)
    container.wait_for_log(LISTENING)
    bootstrap = f"localhost:{host_port}"
    from_host = [(b"host-%d" % n, b"from the host %d" % n) for n in range(5)]
    delivered = produce(bootstrap, topic_name, from_host)
    assert [m.offset() for m in delivered] == list(range(5))

    inside = run_network_client(podman, image, network, "brook:29092", topic_name, 5, 10)
    assert inside["brokers"] == ["brook:29092"]
    assert inside["coordinator"] == "brook:29092"
    assert inside["written"] == list(range(5, 10))
    from_network = [[f"inside-{n}", f"from the network {n}"] for n in range(5)]
    assert inside["received"] == [[k.decode(), v.decode()] for k, v in from_host] + from_network
    assert inside["committed"] == [[topic_name, 0, 10]]

    # The host sees the records the network client wrote, and the same group's coordinator
    # at its own listener's address.
    brokers, coordinator = host_view(bootstrap, group=f"inside-{topic_name}")
    assert brokers == [bootstrap]
    assert coordinator == bootstrap
    received = consume_all(bootstrap, topic_name, 10)
    written_inside = [(k.encode(), v.encode()) for k, v in from_network]
    assert [(m.key(), m.value()) for m in received] == from_host + written_inside
    # README's set-up is right: the host's clients arrive through the published port (at
    # the container's own address, from its gateway) and are sent to the localhost port
    # advertised for them; the network client dialled the address DOCKER advertises.
    # Nothing to warn about.
    assert "reached listener" not in container.logs()

    # A mistake: a container on the network bootstraps from PLAINTEXT, whose advertised
    # localhost is its own. The broker says so, naming the listener and the address.
    assert network_metadata(podman, image, network, "brook:9092") == [f"localhost:{host_port}"]
    logs = container.wait_for_log("reached listener PLAINTEXT")
    (warning,) = [line for line in logs.splitlines() if "reached listener PLAINTEXT" in line]
    assert f"advertises localhost:{host_port}, a loopback address" in warning


def test_containers_reach_the_docker_listener_by_the_default_hostname(
    podman: Podman,
    image: str,
    containers: list[Container],
    network: str,
    volume: str,
    topic_name: str,
) -> None:
    """No BROOK_ADVERTISED_LISTENERS: the entrypoint advertises PLAINTEXT as localhost:9092
    and DOCKER as the container's hostname (its short id), which the network's DNS
    resolves for the other containers."""
    host_port = free_port()
    container = run_container(
        podman,
        image,
        name=unique_name("broker"),
        ports=[f"127.0.0.1:{host_port}:9092"],
        volumes=[f"{volume}:{DATA_DIR}"],
        network=network,
    )
    containers.append(container)
    logs = container.wait_for_log(LISTENING)
    hostname = container.exec("hostname").stdout.strip()
    assert hostname == podman.inspect("container", container.name)["Id"][:12]
    assert f"(advertised PLAINTEXT://localhost:9092, DOCKER://{hostname}:29092)" in logs

    # The health check, then a client on the network: each dials the address its listener
    # advertises (localhost:9092 is 127.0.0.1:9092 inside), so the broker warns of neither.
    check = podman("healthcheck", "run", container.name, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    inside = run_network_client(podman, image, network, f"{hostname}:29092", topic_name, 3, 3)
    assert inside["brokers"] == [f"{hostname}:29092"]
    assert inside["coordinator"] == f"{hostname}:29092"
    assert inside["written"] == [0, 1, 2]
    assert inside["committed"] == [[topic_name, 0, 3]]
    assert "reached listener" not in container.logs()

    # The host, bootstrapping through the mapped port, is sent to PLAINTEXT's default.
    brokers, _ = host_view(f"localhost:{host_port}")
    assert brokers == ["localhost:9092"]
    assert "reached listener DOCKER" not in container.logs()


def test_advertising_the_host_listener_alone_is_refused_naming_the_inter_broker_listener(
    podman: Podman, image: str, containers: list[Container], volume: str
) -> None:
    """Advertising the host's address alone leaves DOCKER, the inter-broker listener,
    unadvertised: Kafka refuses that at start-up, with this message."""
    refused = run_container(
        podman,
        image,
        name=unique_name("refused"),
        volumes=[f"{volume}:{DATA_DIR}"],
        env={"BROOK_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:39092"},
    )
    containers.append(refused)
    assert refused.wait_for_exit() == 2
    logs = refused.logs()
    assert (
        "Invalid configuration: inter.broker.listener.name must be a listener name defined in"
        " advertised.listeners. The valid options based on currently configured listeners"
        " are PLAINTEXT"
    ) in logs
    assert "Traceback" not in logs
    # Refused before it touched the data directory.
    listed = podman("run", "--rm", *ULIMITS, "--volume", f"{volume}:{DATA_DIR}", image, "ls", "-A")
    assert listed.stdout == ""


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
