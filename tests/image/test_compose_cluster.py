"""deploy/cluster/compose.yaml brought up as a user would (`docker compose up --wait`, here
with podman from the file's content: tests/image/compose.py says why): ZooKeeper and three
brokers built from this checkout, clients on the host through the published ports, the
leader of a partition stopped while they produce and consume, and started again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import free_port, wait_until
from tests.integration.clients import consume_all, poll_until, produce
from tests.test_dockerfile import parse

from .compose import ComposeError, ComposeProject, interpolate
from .podman import Podman, build_image, unique_name
from .test_image import run_network_client

REPO = Path(__file__).resolve().parent.parent.parent
COMPOSE_FILE = REPO / "deploy" / "cluster" / "compose.yaml"
BROKERS = (1, 2, 3)
# Bounds on waiting for the cluster's own state, so that a broken cluster fails, not hangs.
WAIT_S = 60.0


def wait_for(what: str, done: Callable[[], bool]) -> None:
    """Poll the cluster's state until `done()`; fail after WAIT_S (each look is a request
    to a container: five a second)."""
    wait_until(done, what, WAIT_S, interval=0.2)


class Cluster:
    """The compose project's brokers, seen from the host through their published ports."""

    def __init__(self, project: ComposeProject, ports: dict[int, int]) -> None:
        self.project = project
        self.ports = ports
        self.bootstrap = ",".join(f"localhost:{port}" for port in ports.values())
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def brokers(self) -> dict[int, str]:
        metadata = self.admin.list_topics(timeout=WAIT_S)
        return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}

    def partition(self, topic: str, number: int = 0) -> tuple[int, list[int], list[int]]:
        """A partition's leader, replicas and ISR, as Metadata gives them."""
        metadata = self.admin.list_topics(topic, timeout=WAIT_S)
        partition = metadata.topics[topic].partitions[number]
        return partition.leader, sorted(partition.replicas), sorted(partition.isrs)

    def container(self, broker_id: int) -> str:
        return self.project.containers[f"broker-{broker_id}"].name


@pytest.fixture
def cluster(podman: Podman, image: str) -> Iterator[Cluster]:
    """The compose file up (images built, or found in the build cache), torn down after:
    containers, network and volumes. The host ports are the file's variables, set to free
    ports so that runs on one machine do not collide."""
    ports = {broker_id: free_port() for broker_id in BROKERS}
    variables = {f"BROOK_PORT_{broker_id}": str(port) for broker_id, port in ports.items()}
    project = ComposeProject(podman, COMPOSE_FILE, unique_name("compose"), variables)

    def build(context: Path, dockerfile: Path, image_name: str) -> str:
        if (context, dockerfile) == (REPO, REPO / "Dockerfile"):
            return image  # the image the other image tests run, built from the same file
        # brook-zookeeper:local as localhost/brook-test-brook-zookeeper:<key>, apart from a
        # user's own images.
        repository = image_name.rsplit(":", 1)[0].replace("/", "-")
        return build_image(podman, context, dockerfile, name=f"brook-test-{repository}")

    try:
        project.up(build)
        yield Cluster(project, ports)
    finally:
        project.down()


def test_compose_file_describes_zookeeper_and_three_brokers_built_here() -> None:
    project = ComposeProject(Podman(), COMPOSE_FILE, "static")
    assert project.start_order() == ["zookeeper", "broker-1", "broker-2", "broker-3"]
    contexts = project.build_contexts()
    assert contexts["broker-1"] == (REPO, REPO / "Dockerfile")
    assert contexts["zookeeper"] == (
        REPO / "docker" / "zookeeper",
        REPO / "docker" / "zookeeper" / "Dockerfile",
    )
    for broker_id in BROKERS:
        service = project.services[f"broker-{broker_id}"]
        assert service.depends_on == {"zookeeper": "service_healthy"}
        environment = service.environment
        assert environment["BROOK_BROKER_ID"] == str(broker_id)
        assert environment["BROOK_ZOOKEEPER_CONNECT"] == "zookeeper:2181/brook"
        # The defaults the file documents, where a user would change them.
        host_port = f"{broker_id}9092"
        assert service.spec["ports"] == [f"127.0.0.1:{host_port}:9092"]
        assert environment["BROOK_ADVERTISED_LISTENERS"] == (
            f"PLAINTEXT://localhost:{host_port},DOCKER://broker-{broker_id}:29092"
        )
        assert service.spec["volumes"] == [f"broker-{broker_id}-data:/var/lib/brook"]


def take_down_leader(cluster: Cluster, topic: str, signal: str) -> int:
    """`docker compose stop` (SIGTERM: a controlled shutdown) or `docker compose kill`
    (SIGKILL: the survivors elect once its ZooKeeper session expires) of the container of
    the partition's leader; returns once another broker leads with the survivors as the ISR
    and Metadata lists only them. The broker's id."""
    leader = cluster.partition(topic)[0]
    if signal == "KILL":
        cluster.project.podman("kill", "--signal", "KILL", cluster.container(leader))
    else:
        cluster.project.podman("stop", cluster.container(leader), timeout=60)
    survivors = [b for b in BROKERS if b != leader]
    wait_for(
        f"after the {signal} of broker {leader}, a leader among {survivors} and they the ISR",
        lambda: (
            cluster.partition(topic)[0] in survivors and cluster.partition(topic)[2] == survivors
        ),
    )
    expected = {b: f"localhost:{cluster.ports[b]}" for b in survivors}
    wait_for("the survivors alone in Metadata", lambda: cluster.brokers() == expected)
    return leader


def bring_back(cluster: Cluster, topic: str, broker_id: int) -> None:
    """`docker compose start`: the broker registers again, catches up and rejoins the ISR."""
    cluster.project.podman("start", cluster.container(broker_id))
    expected = {b: f"localhost:{cluster.ports[b]}" for b in BROKERS}
    wait_for("three brokers in Metadata again", lambda: cluster.brokers() == expected)
    wait_for(
        f"broker {broker_id} back in the ISR", lambda: cluster.partition(topic)[2] == [1, 2, 3]
    )


def records(start: int, stop: int, phase: str) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % n, f"{phase} {n}".encode()) for n in range(start, stop)]


def test_three_brokers_replicate_through_a_stopped_and_a_killed_leader(
    cluster: Cluster, image: str, topic_name: str
) -> None:
    # Every broker registered, each advertised at its own published host port.
    expected = {broker_id: f"localhost:{cluster.ports[broker_id]}" for broker_id in BROKERS}
    wait_for("three brokers in Metadata", lambda: cluster.brokers() == expected)

    # A topic created through a host port without a replication factor gets the file's
    # default.replication.factor (3): a replica on every broker, all in the ISR.
    created = cluster.admin.create_topics([NewTopic(topic_name, num_partitions=1)])
    created[topic_name].result(timeout=WAIT_S)
    wait_for("a leader and a full ISR", lambda: cluster.partition(topic_name)[2] == [1, 2, 3])
    assert cluster.partition(topic_name)[1] == [1, 2, 3]

    written = records(0, 20, "all three")
    delivered = produce(cluster.bootstrap, topic_name, written, acks="all")
    assert [m.offset() for m in delivered] == list(range(20))

    # A group commits through its coordinator; the offsets topic has the file's RF of 3.
    group = f"group-{topic_name}"
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic_name])
        received = poll_until(consumer, lambda out: len(out) >= 20, timeout=WAIT_S)
        assert [(m.key(), m.value()) for m in received] == written
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    offsets = cluster.admin.list_topics("__consumer_offsets", timeout=WAIT_S)
    partitions = offsets.topics["__consumer_offsets"].partitions.values()
    assert {len(p.replicas) for p in partitions} == {3}

    # The leader's container stopped: acks=all with min.insync.replicas=2, the two
    # survivors acknowledge, and every record is read back.
    stopped = take_down_leader(cluster, topic_name, "TERM")
    more = records(20, 30, f"broker {stopped} stopped")
    delivered = produce(cluster.bootstrap, topic_name, more, acks="all")
    assert [m.offset() for m in delivered] == list(range(20, 30))
    written += more
    received = consume_all(cluster.bootstrap, topic_name, 30, timeout=WAIT_S)
    assert [(m.key(), m.value()) for m in received] == written

    # The group's committed offset survived on the offsets topic's other replicas.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic_name, 0)], timeout=WAIT_S)
        assert [tp.offset for tp in committed] == [20]
    finally:
        consumer.close()

    # Two live brokers cannot hold a new topic's three replicas: Kafka's error, no topic.
    refused = cluster.admin.create_topics([NewTopic(f"{topic_name}-rf3", num_partitions=1)])
    with pytest.raises(KafkaException) as error:
        refused[f"{topic_name}-rf3"].result(timeout=WAIT_S)
    assert error.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert f"{topic_name}-rf3" not in cluster.admin.list_topics(timeout=WAIT_S).topics

    bring_back(cluster, topic_name, stopped)

    # The new leader's container killed: a crash, not a handover.
    killed = take_down_leader(cluster, topic_name, "KILL")
    more = records(30, 40, f"broker {killed} killed")
    delivered = produce(cluster.bootstrap, topic_name, more, acks="all")
    assert [m.offset() for m in delivered] == list(range(30, 40))
    written += more
    received = consume_all(cluster.bootstrap, topic_name, 40, timeout=WAIT_S)
    assert [(m.key(), m.value()) for m in received] == written
    bring_back(cluster, topic_name, killed)

    # A client in a container on the compose network bootstraps from the service names and
    # is handed every broker's DOCKER listener, for Metadata and FindCoordinator alike.
    assert cluster.project.network is not None
    docker_listeners = [f"broker-{b}:29092" for b in BROKERS]
    inside = run_network_client(
        cluster.project.podman,
        image,
        cluster.project.network,
        ",".join(docker_listeners),
        topic_name,
        5,
        45,
    )
    assert inside["brokers"] == docker_listeners
    assert inside["coordinator"] in docker_listeners
    assert inside["written"] == list(range(40, 45))
    assert inside["received"][:40] == [[k.decode(), v.decode()] for k, v in written]
    assert inside["committed"] == [[topic_name, 0, 45]]


def test_zookeepers_health_check_in_the_file_is_the_images_own() -> None:
    """Repeated in the file for images built without it; the two must not drift apart."""
    dockerfile = (REPO / "docker" / "zookeeper" / "Dockerfile").read_text()
    (instruction,) = [i for i in parse(dockerfile) if i.keyword == "HEALTHCHECK"]
    options, _, command = instruction.args.partition(" CMD ")
    in_image = dict(option.lstrip("-").split("=") for option in options.split())
    spec = ComposeProject(Podman(), COMPOSE_FILE, "static").services["zookeeper"].spec
    in_file = spec["healthcheck"]
    assert in_file["test"] == ["CMD", *json.loads(command)]
    settings = {key.replace("_", "-"): str(in_file[key]) for key in in_file if key != "test"}
    assert settings == in_image


def test_the_driver_refuses_what_it_does_not_implement_rather_than_ignoring_it(
    tmp_path: Path,
) -> None:
    """So that these tests never pass on a file Docker would run differently."""
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  one:\n    image: x\n    restart: always\n")
    with pytest.raises(ComposeError, match=r"keys this driver does not implement.*restart"):
        ComposeProject(Podman(), compose, "static")
    compose.write_text("services:\n  one:\n    image: x\nnetworks:\n  other: {}\n")
    with pytest.raises(ComposeError, match=r"top-level keys .*networks"):
        ComposeProject(Podman(), compose, "static")


def test_variables_interpolate_as_compose_does() -> None:
    variables = {"SET": "9092", "EMPTY": ""}
    assert interpolate("${SET:-1}:${UNSET:-19092}:${EMPTY:-2}", variables) == "9092:19092:2"
    assert interpolate({"a": ["$${SET}", "${EMPTY}"]}, variables) == {"a": ["${SET}", ""]}
    with pytest.raises(ComposeError, match="is not set"):
        interpolate("${UNSET}", variables)
    with pytest.raises(ComposeError, match="does not implement"):
        interpolate("${SET:?required}", variables)
