"""A leader frozen (SIGSTOP) until the controller has elected another one, with Produce
requests already queued on its connections, answers them NOT_LEADER_OR_FOLLOWER when it
resumes (SIGCONT): the process cannot tell it was paused before kazoo reports the lost
session, so every append as leader asks whether ZooKeeper answered lately (the
leadership lease). Nothing it could have acknowledged is missing from the final log."""

from __future__ import annotations

import json
import signal

from confluent_kafka.admin import AdminClient, NewTopic

from brook.protocol.record_batch import Record, build_batch
from tests.integration.acked import read_all
from tests.integration.processes import watermarks
from tests.integration.raw_client import RawClient, produce_request

from .harness import Cluster, ZooKeeperView, eventually, wait_ready
from .topics import topic_of

TOPIC = "paused"
STATE = f"/brokers/topics/{TOPIC}/partitions/0/state"
ROUNDS = 2


def _produce(client: RawClient, value: bytes, acks: int) -> int:
    """Send a Produce of one record; its correlation id (the answer is read later)."""
    batch = build_batch([Record(0, 1_700_000_000_000, None, value)])
    return client.send(produce_request(TOPIC, 0, batch, acks=acks))


def _state(zk: ZooKeeperView) -> dict:
    return json.loads(zk.get(STATE)[0])


def test_a_paused_leader_refuses_the_writes_queued_while_it_was_replaced(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = {broker_id: cluster.start(broker_id) for broker_id in (1, 2, 3)}
    wait_ready(zk, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
    created[TOPIC].result(30)
    zk.wait_data(STATE, lambda data, _: data is not None and len(json.loads(data)["isr"]) == 3)
    acknowledged: list[bytes] = []
    for round_ in range(ROUNDS):
        state = _state(zk)
        leader = brokers[state["leader"]]
        assert leader.process is not None
        # Before the pause: the leader takes writes.
        with RawClient(leader.port) as client:
            value = f"before-{round_}".encode()
            client.send(produce_request(TOPIC, 0, build_batch([Record(0, 1, None, value)])))
            assert _receive_error(client) == "none"
            acknowledged.append(value)
        queued = {acks: RawClient(leader.port) for acks in (1, -1)}
        try:
            leader.process.send_signal(signal.SIGSTOP)
            try:
                for acks, client in queued.items():
                    _produce(client, f"queued-{round_}-acks{acks}".encode(), acks)
                # Its session expires and the controller elects another leader.
                zk.wait_data(
                    STATE,
                    lambda data, _, old=state: (
                        data is not None
                        and json.loads(data)["leader_epoch"] > old["leader_epoch"]
                        and json.loads(data)["leader"] != old["leader"]
                    ),
                )
            finally:
                leader.process.send_signal(signal.SIGCONT)
            for acks, client in queued.items():
                assert _receive_error(client) == "not_leader_or_follower", f"acks={acks}"
        finally:
            for client in queued.values():
                client.close()
        # It comes back as a follower: the ISR holds all three again.
        zk.wait_data(STATE, lambda data, _: data is not None and len(json.loads(data)["isr"]) == 3)
    # Every broker names the leader ZooKeeper holds before the consumer asks any of them.
    leader = _state(zk)["leader"]
    for broker in brokers.values():
        eventually(lambda b=broker: topic_of(b.port, TOPIC)[1][0].leader, lambda n: n == leader)
    # A new leader's high watermark passes the records it took over once every follower in
    # the ISR has fetched from it (one that asked before the leader knew its new epoch
    # waits replica.fetch.backoff.ms), as in Kafka: wait for it rather than read short.
    eventually(
        lambda: watermarks(bootstrap, TOPIC, 1)[0][1], lambda high: high >= len(acknowledged)
    )
    stored = read_all(bootstrap, TOPIC, 1)[0]
    values = [value for _, value in stored]
    assert values == acknowledged
    assert all(b"queued" not in value for value in values)
    for broker in brokers.values():
        eventually(broker.log_text, lambda text: "Traceback" not in text)


def _receive_error(client: RawClient) -> str:
    from kio.index import load_response_schema

    response = client.receive(load_response_schema(0, 9))
    return str(response.responses[0].partition_responses[0].error_code.name)
