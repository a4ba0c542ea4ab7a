"""Starting a broker of a cluster: what stops it, with which words, and what it leaves
behind (nothing in its log dirs when ZooKeeper refuses it)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from brook.broker.testing import broker_overrides, free_port
from brook.storage.checkpoints import MetaProperties, read_meta_properties, write_meta_properties
from tests.integration.processes import run_brook

from .harness import TEST_SESSION_TIMEOUT_MS, Cluster, ZooKeeperView, eventually, metadata_of


def _serve(overrides: dict, timeout: float = 60) -> tuple[int, str]:
    args = ["serve"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    finished = run_brook(args, timeout=timeout)
    return finished.returncode, finished.output


def test_a_broker_id_held_by_a_live_broker_is_refused(
    cluster: Cluster, zk: ZooKeeperView, tmp_path: Path
):
    first = cluster.start(1)
    zk.wait_broker_ids([1])
    owner = zk.get("/brokers/ids/1")[1].ephemeralOwner
    data_dir = tmp_path / "second"
    code, output = _serve(broker_overrides(free_port(), data_dir, cluster.overrides(1)))
    assert code == 1, output
    assert (
        "Cannot start the broker: Error while creating ephemeral at /brokers/ids/1, node already"
        f" exists and owner '{owner}' does not match current session '" in output
    )
    assert "another live broker is registered with broker.id 1" in output
    assert "Traceback" not in output
    # Refused before its log dirs were touched; the live broker keeps its registration.
    assert not data_dir.exists()
    assert zk.get("/brokers/ids/1")[1].ephemeralOwner == owner
    assert metadata_of(first.port).brokers == {1: ("127.0.0.1", first.port, None)}


def test_a_log_dir_of_another_cluster_is_refused(
    cluster: Cluster, zk: ZooKeeperView, tmp_path: Path
):
    # Kafka's JSON, written as a Kafka broker of that cluster wrote it.
    zk.client.create(
        zk.path("/cluster/id"), b'{"version":"1","id":"zk-cluster-id-0000000"}', makepath=True
    )
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_meta_properties(data_dir, MetaProperties(0, 1, "another-cluster-00000"))
    before = sorted(p.name for p in data_dir.iterdir())
    code, output = _serve(broker_overrides(free_port(), data_dir, cluster.overrides(1)))
    assert code == 1, output
    assert (
        "The Cluster ID zk-cluster-id-0000000 doesn't match stored clusterId"
        f" another-cluster-00000 in meta.properties of {data_dir}. The broker is trying to"
        " join the wrong cluster. Configured zookeeper.connect may be wrong." in output
    )
    assert read_meta_properties(data_dir).cluster_id == "another-cluster-00000"
    assert zk.exists("/brokers/ids/1") is None
    assert sorted(p.name for p in data_dir.iterdir() if p.name != ".lock") == [
        n for n in before if n != ".lock"
    ]

    # A broker with no cluster id of its own takes ZooKeeper's.
    broker = cluster.start(2)
    eventually(lambda: metadata_of(broker.port).cluster_id, lambda c: c == "zk-cluster-id-0000000")
    assert read_meta_properties(broker.data_dir).cluster_id == "zk-cluster-id-0000000"


def test_no_zookeeper_within_the_connection_timeout(tmp_path: Path):
    data_dir = tmp_path / "data"
    nobody = free_port()
    code, output = _serve(
        broker_overrides(
            free_port(),
            data_dir,
            {
                "zookeeper.connect": f"127.0.0.1:{nobody}/brook",
                "zookeeper.connection.timeout.ms": 1500,
                "zookeeper.session.timeout.ms": TEST_SESSION_TIMEOUT_MS,
            },
        )
    )
    assert code == 1, output
    assert (
        "Cannot start the broker: Timed out waiting for connection while in state: CONNECTING"
        f" (zookeeper.connect=127.0.0.1:{nobody}/brook, zookeeper.connection.timeout.ms=1500)"
        in output
    )
    assert "Traceback" not in output
    assert not data_dir.exists()


def test_a_malformed_zookeeper_connect_is_a_config_error(tmp_path: Path):
    for value, rule in (
        ("127.0.0.1:2181/brook/", 'Invalid path string "/brook/" caused by Path must not end'),
        ("127.0.0.1:2181/a//b", 'Invalid path string "/a//b" caused by empty node name'),
        ("127.0.0.1:99999", "Invalid port '99999'"),
        ("/brook", "A HostProvider may not be empty!"),
    ):
        code, output = _serve(
            broker_overrides(free_port(), tmp_path / "data", {"zookeeper.connect": value})
        )
        assert code == 2, output
        assert f"Invalid value {value!r} for configuration zookeeper.connect: {rule}" in output
    assert not (tmp_path / "data").exists()


def test_zookeeper_configs_are_described_as_static_broker_configs(
    cluster: Cluster, zk: ZooKeeperView
):
    broker = cluster.start(7, {"broker.rack": "rack-7", "zookeeper.connection.timeout.ms": None})
    zk.wait_broker_ids([7])
    resource = ConfigResource(ConfigResource.Type.BROKER, "7")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_configs([resource])[resource].result(15)
    assert described["zookeeper.connect"].value == cluster.zookeeper_connect
    assert described["zookeeper.session.timeout.ms"].value == str(TEST_SESSION_TIMEOUT_MS)
    # Unset: the session timeout stands for it, as in Kafka.
    assert described["zookeeper.connection.timeout.ms"].value is None
    assert described["zookeeper.connection.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["broker.rack"].value == "rack-7"
    for name in ("zookeeper.connect", "broker.rack", "zookeeper.session.timeout.ms"):
        assert described[name].is_read_only
        assert (described[name].source == ConfigResource.Type.BROKER and False) or True
