"""No acknowledged record is lost while one in-sync replica survives: an idempotent
producer at acks=all (min.insync.replicas=2, replication factor 3) writes without pause
while the leader of a partition is SIGKILLed at a random moment and brought back, round
after round; then every acknowledged record is read back at its offset, none twice, each
partition in the order it was sent.

12 rounds in the suite; BROOK_LOSS_ROUNDS=300 (say) for a longer run on demand.
"""

from __future__ import annotations

import logging
import os
import random

from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.zookeeper.server import ZooKeeperServer
from tests.integration.acked import (
    AckRecorder,
    assert_all_acked_kept,
    assert_order_kept,
    read_all,
)

from .harness import Cluster, ZooKeeperView, eventually, metadata_of, wait_ready

log = logging.getLogger("tests.cluster.loss")

ROUNDS = int(os.environ.get("BROOK_LOSS_ROUNDS", "12"))
PARTITIONS = 3
TOPIC = "ledger"


def _leader_and_isr(zk: ZooKeeperView) -> tuple[int, list[int]]:
    """Partition 0's leader and ISR, as its state znode holds them."""
    state = zk.json(f"/brokers/topics/{TOPIC}/partitions/0/state")
    return state["leader"], state["isr"]


def test_no_acknowledged_record_is_lost_across_leader_kills(
    cluster: Cluster, zk: ZooKeeperView, zookeeper: ZooKeeperServer
):
    # The shortest session ZooKeeper grants (2 of its 500 ms ticks): each failover waits
    # for the killed broker's session to expire.
    fast = {"zookeeper.session.timeout.ms": 1000}
    brokers = {broker_id: cluster.start(broker_id, fast) for broker_id in (1, 2, 3)}
    wait_ready(zk, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
    )
    created[TOPIC].result(30)
    rng = random.Random(ROUNDS)
    with AckRecorder(
        bootstrap, TOPIC, "loss", partitions=PARTITIONS, acks="all", idempotent=True, rate=3000
    ) as producer:
        for _ in range(ROUNDS):
            # A random moment: after some hundreds of acknowledged writes.
            producer.wait_for_acks(len(producer.acked) + rng.randint(100, 1500), timeout=120)
            leader, _ = _leader_and_isr(zk)
            brokers[leader].kill()
            # A new leader from the ISR takes writes again...
            eventually(
                lambda: _leader_and_isr(zk)[0],
                lambda new, killed=leader: new not in (-1, killed),
                timeout=60,
            )
            producer.wait_for_acks(len(producer.acked) + 20, timeout=120)
            # ... and the killed broker comes back, truncates what it must, and rejoins.
            brokers[leader] = cluster.restart(brokers[leader], leader, extra=fast)
            eventually(lambda: sorted(_leader_and_isr(zk)[1]), lambda isr: isr == [1, 2, 3], 60)
        producer.wait_for_acks(len(producer.acked) + 100, timeout=120)
    acked = producer.acked
    stored = read_all(bootstrap, TOPIC, PARTITIONS)
    assert_all_acked_kept(stored, acked)
    assert_order_kept(stored)
    log.warning(  # what the closing notes report
        "loss test: %d rounds, %d records sent, %d acknowledged, %d failed, %d stored;"
        " 0 acknowledged lost, 0 duplicates",
        ROUNDS,
        producer.sent,
        len(acked),
        producer.failed,
        sum(len(records) for records in stored.values()),
    )
    assert metadata_of(brokers[1].port).brokers.keys() == {1, 2, 3}
