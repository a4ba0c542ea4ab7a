"""Brokers of one ZooKeeper cluster as `brook serve` processes, and ZooKeeper read the
way a person with zookeeper-shell reads it (kazoo, outside the brokers).

Every test gets a chroot of its own in the module's ZooKeeper server, so tests share a
server and never see each other's znodes. Waits are on ZooKeeper's own watches, or on
what the brokers answer; never a sleep.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from brook.broker.testing import BrokerProcess
from tests.integration.processes import ServeProcess
from tests.integration.raw_client import RawClient, make

WAIT_S = 30.0
# Short sessions, so that a killed broker's registration goes within seconds (the
# test ZooKeeper's 500 ms tick allows sessions from 1 s).
TEST_SESSION_TIMEOUT_MS = 2000
TEST_CONNECTION_TIMEOUT_MS = 30_000


class ZooKeeperView:
    """Reads and waits on the znodes under one chroot."""

    def __init__(self, client: KazooClient, chroot: str) -> None:
        self.client = client
        self.chroot = chroot

    def path(self, path: str) -> str:
        return self.chroot + path if path != "/" else self.chroot

    def exists(self, path: str) -> ZnodeStat | None:
        return self.client.exists(self.path(path))

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        data, stat = self.client.get(self.path(path))
        return data, stat

    def json(self, path: str) -> Any:
        return json.loads(self.get(path)[0])

    def children(self, path: str) -> list[str]:
        return sorted(self.client.get_children(self.path(path)))

    def broker_ids(self) -> list[int]:
        try:
            return sorted(int(child) for child in self.children("/brokers/ids"))
        except NoNodeError:
            return []

    def wait_children(
        self, path: str, predicate: Callable[[list[str]], bool], timeout: float = WAIT_S
    ) -> list[str]:
        """Until the children of `path` satisfy `predicate` (a missing path first waited
        for: a starting broker makes it)."""
        self.wait_data(path, lambda _, stat: stat is not None, timeout)
        done = threading.Event()
        seen: list[list[str]] = [[]]

        def watch(children: list[str]) -> bool | None:
            seen[0] = sorted(children)
            if predicate(seen[0]):
                done.set()
                return False  # stop watching
            return None

        ChildrenWatch(self.client, self.path(path), watch)
        assert done.wait(timeout), f"children of {path} still {seen[0]} after {timeout} s"
        return seen[0]

    def wait_broker_ids(self, ids: list[int], timeout: float = WAIT_S) -> None:
        self.wait_children(
            "/brokers/ids", lambda children: sorted(map(int, children)) == ids, timeout
        )

    def wait_data(
        self,
        path: str,
        predicate: Callable[[bytes | None, ZnodeStat | None], bool],
        timeout: float = WAIT_S,
    ) -> tuple[bytes | None, ZnodeStat | None]:
        """Until the znode's data and stat (None, None when it is missing) satisfy
        `predicate`."""
        done = threading.Event()
        seen: list[tuple[bytes | None, ZnodeStat | None]] = [(None, None)]

        def watch(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            seen[0] = (data, stat)
            if predicate(data, stat):
                done.set()
                return False
            return None

        DataWatch(self.client, self.path(path), watch)
        assert done.wait(timeout), f"{path} still {seen[0][0]!r} after {timeout} s"
        return seen[0]

    def wait_controller(self, predicate: Callable[[int | None], bool]) -> int | None:
        """Until /controller names a broker satisfying `predicate` (None: no controller)."""
        data, _ = self.wait_data(
            "/controller",
            lambda data, _: predicate(json.loads(data)["brokerid"] if data else None),
        )
        return json.loads(data)["brokerid"] if data else None

    def controller_epoch(self) -> int:
        return int(self.get("/controller_epoch")[0])


class Cluster:
    """The `brook serve` processes of one test's cluster (its chroot), stopped at teardown
    by their own pids."""

    def __init__(self, root: Path, zookeeper_connect: str) -> None:
        self.root = root
        self.zookeeper_connect = zookeeper_connect
        self.started: list[ServeProcess] = []

    def overrides(self, broker_id: int, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        overrides: dict[str, Any] = {
            "broker.id": broker_id,
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": TEST_SESSION_TIMEOUT_MS,
            # Unset, the connection timeout is the session's, 2 s here: on a loaded machine
            # ZooKeeper can take longer than that to answer a first connect, and a broker
            # that cannot connect in time exits, as Kafka's does.
            "zookeeper.connection.timeout.ms": TEST_CONNECTION_TIMEOUT_MS,
            # A broker stopped last has no one to hand its leaders to: its controlled
            # shutdown retries, and at the default 5 s apart each teardown would wait 10 s.
            "controlled.shutdown.retry.backoff.ms": 200,
        }
        overrides.update(extra or {})
        # An extra of None leaves the key unset (the broker's default).
        return {key: value for key, value in overrides.items() if value is not None}

    def start(
        self,
        broker_id: int,
        extra: Mapping[str, Any] | None = None,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        args: tuple[str, ...] = (),
    ) -> ServeProcess:
        """A broker, returned once it listens (its registration may follow: wait on it)."""
        run = len(self.started) + 1
        broker = ServeProcess(
            data_dir or self.root / f"broker-{broker_id}",
            self.overrides(broker_id, extra),
            port=port,
            log_path=self.root / f"broker-{broker_id}-run-{run}.log",
            args=args,
        )
        self.started.append(broker)
        broker.start()
        return broker

    def restart(self, previous: BrokerProcess, broker_id: int, **kwargs: Any) -> ServeProcess:
        assert previous.process is not None and previous.process.poll() is not None
        return self.start(broker_id, port=previous.port, data_dir=previous.data_dir, **kwargs)

    def stop_all(self) -> None:
        """SIGKILL: a test's cluster is thrown away, and stopping it broker by broker made
        each controlled shutdown move leaders onto the brokers left, then wait out the
        retries of the last (about 0.6 CPU-s a cluster; the shutdown itself is tested
        where it is the subject: test_controlled_shutdown.py). A killed broker is gone at
        once, before the others' ZooKeeper watches could tell them."""
        for broker in self.started:
            broker.kill()


def new_chroot() -> str:
    return f"/brook-{uuid.uuid4().hex[:10]}"


def eventually(
    read: Callable[[], Any], predicate: Callable[[Any], bool], timeout: float = WAIT_S
) -> Any:
    """Read a broker's answer again until it satisfies `predicate` (a broker learns of the
    others through its own watches, a moment after ZooKeeper shows the change)."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout} s")
        time.sleep(0.05)


@dataclass(frozen=True)
class MetadataSeen:
    """What one broker's Metadata (v12) answers about the cluster."""

    controller_id: int
    cluster_id: str | None
    brokers: dict[int, tuple[str, int, str | None]]  # id -> host, port, rack


def metadata_of(port: int) -> MetadataSeen:
    """Metadata v12 from exactly the broker at `port` (a client library would pick any)."""
    from kio.schema.metadata.v12 import request as metadata12

    with RawClient(port) as client:
        response = client.request(
            metadata12.MetadataRequest(
                topics=(),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    return MetadataSeen(
        response.controller_id,
        response.cluster_id,
        {b.node_id: (b.host, b.port, b.rack) for b in response.brokers},
    )


def describe_cluster_of(port: int, version: int, **fields: Any) -> Any:
    """DescribeCluster of one version from exactly the broker at `port`."""
    from kio.index import load_request_schema

    request_type = load_request_schema(60, version)
    values = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    values.update(fields)
    with RawClient(port) as client:
        return client.request(make(request_type, include_fenced_brokers=False, **values))


def wait_ready(zk: ZooKeeperView, brokers: Mapping[int, Any]) -> None:
    """Every broker registered, a controller elected, and every broker's Metadata naming
    all the brokers and that controller: what an AdminClient needs before its first
    controller request (librdkafka, told of no controller, waits for a later metadata
    refresh, and a CreateTopics sent at once may time out on a loaded machine)."""
    ids = sorted(brokers)
    zk.wait_broker_ids(ids)
    controller = zk.wait_controller(lambda found: found is not None)
    for broker in brokers.values():
        eventually(
            lambda b=broker: metadata_of(b.port),
            lambda seen: sorted(seen.brokers) == ids and seen.controller_id == controller,
        )
