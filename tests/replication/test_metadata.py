"""Metadata tells clients where each partition's leader is, which replicas are offline,
and when a partition has no reachable leader (so that clients refresh and retry)."""

from __future__ import annotations

from kio.schema.metadata.v12 import request as metadata12

from tests.integration.raw_client import RawClient

from .harness import ScriptedController

LEADER_NOT_AVAILABLE = 5


def _partitions(port: int, topic: str) -> list[tuple[int, int, int, tuple, tuple, tuple]]:
    with RawClient(port) as client:
        response = client.request(
            metadata12.MetadataRequest(
                topics=(metadata12.MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    return [
        (
            int(p.error_code),
            int(p.leader_id),
            int(p.leader_epoch),
            tuple(p.replica_nodes),
            tuple(p.isr_nodes),
            tuple(p.offline_replicas),
        )
        for p in sorted(response.topics[0].partitions, key=lambda p: p.partition_index)
    ]


def test_leaders_replicas_and_offline_replicas(cluster: ScriptedController):
    first = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("spread", [0, 1], partitions=2)
    cluster.elect("spread", 1, leader=1)
    assert _partitions(first.port, "spread") == [
        (0, 0, 0, (0, 1), (0, 1), ()),
        (0, 1, 1, (0, 1), (0, 1), ()),
    ]
    # Broker 1 is gone (unregistered): its replicas are offline, and the partition it
    # led has no leader until the controller elects one.
    cluster.stop(1)
    assert _partitions(first.port, "spread") == [
        (0, 0, 0, (0, 1), (0, 1), (1,)),
        (LEADER_NOT_AVAILABLE, -1, 1, (0, 1), (0, 1), (1,)),
    ]
    cluster.elect("spread", 1, leader=0, isr=[0])
    assert _partitions(first.port, "spread")[1] == (0, 0, 2, (0, 1), (0,), (1,))
