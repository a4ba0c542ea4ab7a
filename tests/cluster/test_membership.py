"""Brokers joining a cluster through ZooKeeper: Kafka's znodes and JSON, read with kazoo as
zookeeper-shell would; Metadata from every broker listing them all, as librdkafka,
kafka-python and aiokafka see it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from aiokafka import AIOKafkaClient
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.admin import KafkaAdminClient

from brook.broker.testing import free_port
from brook.protocol.errors import ErrorCode
from brook.storage.checkpoints import read_meta_properties

from .harness import Cluster, ZooKeeperView, describe_cluster_of, eventually, metadata_of

KAFKA_PROPERTIES = Path(__file__).parent.parent / "integration" / "kafka_properties"
PASSING_OVER = re.compile(r"WARNING .*Passing over \d+ key\(s\) of ")


def test_a_broker_registers_in_kafkas_znodes(cluster: Cluster, zk: ZooKeeperView):
    assert zk.exists("/") is None  # the chroot: the broker makes it
    port, external = free_port(), free_port()
    broker = cluster.start(
        1,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:{external}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},EXTERNAL://localhost:{external}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "broker.rack": "rack-a",
        },
        port=port,
    )
    zk.wait_broker_ids([1])
    zk.wait_controller(lambda controller: controller == 1)
    registration, stat = zk.get("/brokers/ids/1")
    # Jackson's compact JSON, as a Kafka broker writes it.
    assert b" " not in registration
    info = zk.json("/brokers/ids/1")
    assert int(info.pop("timestamp")) > 0
    assert info == {
        "version": 5,
        "host": "127.0.0.1",
        "port": port,
        "endpoints": [f"PLAINTEXT://127.0.0.1:{port}", f"EXTERNAL://localhost:{external}"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
        "rack": "rack-a",
        "jmx_port": -1,
        "features": {
            "share.version": {"min_version": 0, "max_version": 1},
            "transaction.version": {"min_version": 0, "max_version": 2},
        },
    }
    assert stat.ephemeralOwner != 0
    controller, controller_stat = zk.get("/controller")
    assert controller_stat.ephemeralOwner == stat.ephemeralOwner
    assert re.fullmatch(rb'\{"version":1,"brokerid":1,"timestamp":"\d+"\}', controller)
    assert zk.get("/controller_epoch")[0] == b"1"
    assert zk.exists("/controller_epoch").ephemeralOwner == 0
    cluster_id = zk.json("/cluster/id")
    assert cluster_id["version"] == "1" and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id["id"])
    # Kafka's persistent paths, made at start.
    for path in (
        "/brokers/topics",
        "/brokers/seqid",
        "/config/topics",
        "/config/brokers",
        "/config/changes",
        "/admin/delete_topics",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
    ):
        assert zk.exists(path) is not None, path
    # The log dir, and every client, carry the cluster id ZooKeeper holds.
    assert read_meta_properties(broker.data_dir).cluster_id == cluster_id["id"]
    # The broker learns of its own election through the same watch as everyone else's
    # (and a loaded machine may suspend its ZooKeeper session for a moment): wait for it.
    seen = eventually(lambda: metadata_of(port), lambda seen: seen.controller_id == 1)
    assert seen.cluster_id == cluster_id["id"]
    assert seen.brokers == {1: ("127.0.0.1", port, "rack-a")}
    # On the EXTERNAL listener, the EXTERNAL endpoint.
    assert metadata_of(external).brokers == {1: ("localhost", external, "rack-a")}
    assert "Created zookeeper path" in broker.log_text()
    assert "1 successfully elected as the controller" in broker.log_text()
    assert broker.stop() == 0


def _three_brokers(cluster: Cluster, zk: ZooKeeperView) -> list:
    brokers = [cluster.start(i, {"broker.rack": f"rack-{i}"}) for i in (1, 2, 3)]
    zk.wait_broker_ids([1, 2, 3])
    zk.wait_controller(lambda controller: controller is not None)
    return brokers


def test_every_broker_lists_every_broker_and_the_same_controller(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = _three_brokers(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    expected = {i + 1: ("127.0.0.1", b.port, f"rack-{i + 1}") for i, b in enumerate(brokers)}
    cluster_id = zk.json("/cluster/id")["id"]
    for broker in brokers:
        seen = eventually(
            lambda b=broker: metadata_of(b.port),
            lambda s: s.brokers == expected and s.controller_id == controller,
        )
        assert seen.cluster_id == cluster_id
    # Exactly one of them says it is the controller, in its log.
    elected = [b for b in brokers if "successfully elected as the controller" in b.log_text()]
    assert len(elected) == 1 and elected[0] is brokers[controller - 1]

    # librdkafka
    for broker in brokers:
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert metadata.controller_id == controller
        assert metadata.cluster_id == cluster_id
        assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
            i: (host, port) for i, (host, port, _) in expected.items()
        }
    # kafka-python
    admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert described["controller_id"] == controller
    assert described["cluster_id"] == cluster_id
    assert {b["broker_id"]: (b["host"], b["port"], b["rack"]) for b in described["brokers"]} == (
        expected
    )

    # aiokafka
    async def aiokafka_view() -> tuple[int, dict[int, tuple[str, int, str | None]]]:
        client = AIOKafkaClient(bootstrap_servers=brokers[2].bootstrap)
        await client.bootstrap()
        try:
            cluster_view = client.cluster
            return cluster_view.controller.nodeId, {
                b.nodeId: (b.host, b.port, b.rack) for b in cluster_view.brokers()
            }
        finally:
            await client.close()

    assert asyncio.run(aiokafka_view()) == (controller, expected)


def test_a_broker_without_the_requests_listener_is_left_out(cluster: Cluster, zk: ZooKeeperView):
    """Kafka's rule: Metadata lists a broker only with an endpoint on the listener the
    request came in on."""
    port, external = free_port(), free_port()
    cluster.start(
        1,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:{external}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:{external}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        },
        port=port,
    )
    second = cluster.start(2)
    zk.wait_broker_ids([1, 2])
    both = {1: ("127.0.0.1", port, None), 2: ("127.0.0.1", second.port, None)}
    eventually(lambda: metadata_of(port), lambda seen: seen.brokers == both)
    assert metadata_of(external).brokers == {1: ("127.0.0.1", external, None)}
    eventually(lambda: metadata_of(second.port), lambda seen: seen.brokers == both)


def test_new_listeners_reach_the_registration_and_the_other_brokers(
    cluster: Cluster, zk: ZooKeeperView
):
    first = cluster.start(1)
    second = cluster.start(2)
    zk.wait_broker_ids([1, 2])
    added = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{first.port},EXTRA://127.0.0.1:{added}"
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    changes = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
    }
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in changes.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(15)
    zk.wait_data(
        "/brokers/ids/1",
        lambda data, _: data is not None and f"EXTRA://127.0.0.1:{added}".encode() in data,
    )
    # Clients of the new listener see broker 1 there; broker 2, which has no such
    # listener, is left out of that answer and still lists both on PLAINTEXT.
    eventually(
        lambda: metadata_of(added).brokers,
        lambda brokers: brokers == {1: ("127.0.0.1", added, None)},
    )
    assert metadata_of(second.port).brokers == {
        1: ("127.0.0.1", first.port, None),
        2: ("127.0.0.1", second.port, None),
    }
    assert "Updated broker 1 at path /brokers/ids/1" in first.log_text()


def test_a_kafka_zookeeper_server_properties_joins_the_cluster(cluster: Cluster, zk: ZooKeeperView):
    """Kafka 3.x's ZooKeeper-flavoured file, its zookeeper.connect pointed at the test's
    ZooKeeper on the command line, as a user does: the keys of ZooKeeper are Brook's now."""
    broker = cluster.start(0, args=(str(KAFKA_PROPERTIES / "zookeeper-server.properties"),))
    zk.wait_broker_ids([0])
    eventually(
        lambda: metadata_of(broker.port).brokers,
        lambda brokers: brokers == {0: ("127.0.0.1", broker.port, None)},
    )
    passed_over = [line for line in broker.log_text().splitlines() if PASSING_OVER.search(line)]
    assert len(passed_over) == 1, passed_over
    assert "num.io.threads" in passed_over[0]
    for key in ("zookeeper.connect", "zookeeper.connection.timeout.ms"):
        assert key not in passed_over[0], passed_over[0]
    assert "Traceback" not in broker.log_text()
    assert broker.stop() == 0


def test_describe_cluster_lists_the_live_brokers_and_the_controller(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = _three_brokers(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    cluster_id = zk.json("/cluster/id")["id"]
    expected = {i + 1: ("127.0.0.1", b.port, f"rack-{i + 1}") for i, b in enumerate(brokers)}
    for broker in brokers:
        eventually(lambda b=broker: metadata_of(b.port).brokers, lambda seen: seen == expected)
        for version in (0, 1, 2):
            described = describe_cluster_of(broker.port, version)
            assert described.error_code == ErrorCode.none
            assert described.cluster_id == cluster_id
            assert described.controller_id == controller
            assert {b.broker_id: (b.host, b.port, b.rack) for b in described.brokers} == expected
    # librdkafka's describe_cluster asks DescribeCluster.
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    described = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert described.controller.id == controller
    assert described.cluster_id == cluster_id
    assert sorted((n.id, n.host, n.port, n.rack) for n in described.nodes) == [
        (i, *expected[i]) for i in (1, 2, 3)
    ]
    assert described.authorized_operations  # no authorizer: every cluster operation


def test_describe_cluster_for_controllers_or_an_unknown_endpoint_type_is_refused(
    cluster: Cluster, zk: ZooKeeperView
):
    broker = cluster.start(1)
    zk.wait_broker_ids([1])
    asked_controllers = describe_cluster_of(broker.port, 2, endpoint_type=2)
    assert asked_controllers.error_code == ErrorCode.mismatched_endpoint_type
    assert asked_controllers.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of"
        " type CONTROLLER"
    )
    assert asked_controllers.brokers == ()
    unknown = describe_cluster_of(broker.port, 1, endpoint_type=7)
    assert unknown.error_code == ErrorCode.unsupported_endpoint_type
    assert unknown.error_message == "Unsupported endpoint type 7"
    # The broker goes on answering.
    assert describe_cluster_of(broker.port, 2).error_code == ErrorCode.none


def test_a_registration_kafka_wrote_is_listed_and_a_malformed_one_is_not(
    cluster: Cluster, zk: ZooKeeperView
):
    """What the watch reads is Kafka's JSON: a Kafka 2.x broker's registration (version 4,
    written here with the test's own session) is listed; one that is not JSON is left out,
    with a log line naming it."""
    broker = cluster.start(1)
    zk.wait_broker_ids([1])
    zk.client.create(
        zk.path("/brokers/ids/8"),
        b'{"version":4,"host":"kafka-8","port":9092,"jmx_port":-1,"timestamp":"1",'
        b'"endpoints":["PLAINTEXT://kafka-8:9092"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":"r8"}',
        ephemeral=True,
    )
    zk.client.create(zk.path("/brokers/ids/9"), b"garbage", ephemeral=True)
    eventually(
        lambda: metadata_of(broker.port).brokers,
        lambda brokers: (
            brokers == {1: ("127.0.0.1", broker.port, None), 8: ("kafka-8", 9092, "r8")}
        ),
    )
    log = eventually(broker.log_text, lambda text: "registration for broker 9" in text)
    assert "Failed to parse ZooKeeper registration for broker 9: garbage" in log
    assert "broker 9 is left out of the metadata" in log
    # Its registration goes: so does broker 8 from the metadata.
    zk.client.delete(zk.path("/brokers/ids/8"))
    eventually(
        lambda: metadata_of(broker.port).brokers,
        lambda brokers: brokers == {1: ("127.0.0.1", broker.port, None)},
    )
