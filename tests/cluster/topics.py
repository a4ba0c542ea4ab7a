"""What the cluster tests of topics share: three brokers with short timeouts, and each
broker's own view of a topic (its Metadata, raw, from exactly that broker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.integration.processes import ServeProcess
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, metadata_of

# Short, so that a follower that stops fetching leaves the ISR within a second or two.
REPLICATION = {
    "replica.lag.time.max.ms": 1500,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
}


def start_three(cluster: Cluster, zk: ZooKeeperView, **extra: Any) -> dict[int, ServeProcess]:
    brokers = {
        i: cluster.start(i, {"broker.rack": f"rack-{i}", **REPLICATION, **extra}) for i in (1, 2, 3)
    }
    zk.wait_broker_ids([1, 2, 3])
    zk.wait_controller(lambda controller: controller is not None)
    # Each broker has seen the others (its own watch, a moment after ZooKeeper shows them).
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 3)
    return brokers


@dataclass(frozen=True)
class PartitionSeen:
    error: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


def topic_of(
    port: int, topic: str, auto_create: bool = False
) -> tuple[int, dict[int, PartitionSeen]]:
    """The topic's error and partitions as the broker at `port` answers Metadata v12."""
    from kio.schema.metadata.v12 import request as metadata12

    with RawClient(port) as client:
        response = client.request(
            metadata12.MetadataRequest(
                topics=(metadata12.MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=auto_create,
                include_topic_authorized_operations=False,
            )
        )
    (seen,) = response.topics
    return seen.error_code, {
        p.partition_index: PartitionSeen(
            p.error_code,
            p.leader_id,
            p.leader_epoch,
            tuple(p.replica_nodes),
            tuple(p.isr_nodes),
            tuple(p.offline_replicas),
        )
        for p in seen.partitions
    }


def state_of(zk: ZooKeeperView, topic: str, partition: int) -> dict[str, Any]:
    return zk.json(f"/brokers/topics/{topic}/partitions/{partition}/state")  # type: ignore[no-any-return]
