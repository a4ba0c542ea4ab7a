"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka's share
consumer) against a real broker: consumers sharing one partition see each record once,
RELEASE delivers again with the delivery count up, REJECT and the delivery limit archive,
an unacknowledged record comes back when its lock runs out, a consumer whose connection
dies gives back what it held, read_committed skips aborted records, and what was
accepted stays accepted across a restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from brook.broker.share.share_partition import RecordState, SharePartition
from brook.broker.testing import BrokerThread, wait_until

from .processes import Brokers

# Locks of a second, so that a test waits on expiry briefly; share-group heartbeats
# often, so a consumer gets its partitions soon.
SHARE_CONFIG = {
    "group_share_min_record_lock_duration_ms": 1000,
    "group_share_min_heartbeat_interval_ms": 200,
    "group_share_heartbeat_interval_ms": 200,
}
pytestmark = pytest.mark.brook_config(**SHARE_CONFIG)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int = 1) -> str:
    topic = _name("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


def _group_config(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    for name, value in configs.items():
        resource.add_incremental_config(
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        )
    admin.incremental_alter_configs([resource])[resource].result(15)


def _produce(bootstrap: str, topic: str, values: list[str], batch: int = 0) -> None:
    """Produce `values`, in batches of `batch` records (0: as the producer batches)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for index, value in enumerate(values, 1):
        producer.produce(topic, value=value.encode())
        if batch and index % batch == 0:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def _consumer(bootstrap: str, group: str, **config: object) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})


def _poll(consumer: ShareConsumer, timeout: float = 1.0) -> list[Message]:
    messages = consumer.poll(timeout) or []
    for message in messages:
        assert message.error() is None, message.error()
    return list(messages)


@pytest.fixture
def share_group(brook_broker: BrokerThread) -> Iterator[tuple[str, str]]:
    """A topic and a share group that starts at the earliest offset."""
    topic = _topic(brook_broker.bootstrap)
    group = _name("group")
    _group_config(brook_broker.bootstrap, group, share_auto_offset_reset="earliest")
    yield topic, group


def test_consumers_sharing_one_partition_see_each_record_once(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    values = [f"r{i}" for i in range(300)]
    # Batches of ten and ten records a poll: each fetch acquires a batch or so, and the
    # three consumers take turns at the one partition.
    _produce(bootstrap, topic, values, batch=10)
    consumers = [_consumer(bootstrap, group, **{"max.poll.records": 10}) for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe([topic])
    seen: dict[str, int] = {}
    by_consumer = [0, 0, 0]
    deadline = time.monotonic() + 30
    while len(seen) < len(values) and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            for message in _poll(consumer, 0.2):
                value = message.value().decode()
                seen[value] = seen.get(value, 0) + 1
                by_consumer[index] += 1
    for consumer in consumers:
        consumer.close()
    assert sorted(seen) == sorted(values)
    assert set(seen.values()) == {1}, {v: n for v, n in seen.items() if n > 1}
    # They all read the one partition: the broker hands records to whoever asks.
    assert all(by_consumer), by_consumer


def test_release_delivers_again_and_reject_archives(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _produce(bootstrap, topic, ["keep", "again", "poison"])
    consumer = _consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    first = wait_until(lambda: _poll(consumer), "the first delivery")
    assert [m.value() for m in first] == [b"keep", b"again", b"poison"]
    assert {m.delivery_count() for m in first} == {1}
    kinds = {b"keep": AcknowledgeType.ACCEPT, b"again": AcknowledgeType.RELEASE}
    for message in first:
        consumer.acknowledge(message, kinds.get(message.value(), AcknowledgeType.REJECT))
    consumer.commit_sync()
    again = wait_until(lambda: _poll(consumer), "the released record")
    assert [(m.value(), m.delivery_count()) for m in again] == [(b"again", 2)]
    for message in again:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync()
    # Nothing else comes: "keep" accepted, "poison" archived.
    assert _poll(consumer, 2.0) == []
    share = _share_partition(brook_broker, group, topic)
    assert _state(brook_broker, share) == (3, 0, 0)
    consumer.close()


def _share_partition(broker: BrokerThread, group: str, topic: str) -> SharePartition:
    """The broker's share partition of the group's topic (read on its loop)."""

    def find() -> SharePartition | None:
        services = broker.broker.services
        partitions = broker.call(lambda: services.share_partitions.manager.share_partitions())
        for (owner, _, _), share in partitions.items():
            if owner == group and share.topic == topic:
                return share  # type: ignore[no-any-return]
        return None

    found: SharePartition = wait_until(find, f"the share partition of {group}")
    return found


def _state(broker: BrokerThread, share: SharePartition) -> tuple[int, int, int]:
    """Start offset, records in flight and records acquired, as the broker has them."""
    return broker.call(
        lambda: (share.start_offset, share.in_flight(), share.counts()[RecordState.ACQUIRED])
    )  # type: ignore[no-any-return]


def test_the_delivery_limit_archives_a_poison_record(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _group_config(bootstrap, group, share_delivery_count_limit="2")
    _produce(bootstrap, topic, ["poison", "fine"])
    consumer = _consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    deliveries = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        messages = _poll(consumer, 0.5)
        for message in messages:
            deliveries.append((message.value(), message.delivery_count()))
            kind = (
                AcknowledgeType.RELEASE if message.value() == b"poison" else AcknowledgeType.ACCEPT
            )
            consumer.acknowledge(message, kind)
        if messages:
            consumer.commit_sync()
        if (b"poison", 2) in deliveries and (b"fine", 1) in deliveries and not messages:
            break
    consumer.close()
    assert deliveries.count((b"fine", 1)) == 1
    # Released twice, then archived: never a third delivery.
    assert [count for value, count in deliveries if value == b"poison"] == [1, 2]


def test_an_unacknowledged_record_comes_back_when_its_lock_expires(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _group_config(bootstrap, group, share_record_lock_duration_ms="1000")
    _produce(bootstrap, topic, ["slow"])
    holder = _consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    holder.subscribe([topic])
    got = wait_until(lambda: _poll(holder), "the first delivery")
    assert [(m.value(), m.delivery_count()) for m in got] == [(b"slow", 1)]
    # The holder neither acknowledges nor polls: another consumer gets the record once
    # the lock runs out.
    other = _consumer(bootstrap, group)
    other.subscribe([topic])
    again = wait_until(lambda: _poll(other), "the record after its lock expired", timeout=20)
    assert [(m.value(), m.delivery_count()) for m in again] == [(b"slow", 2)]
    other.close()
    holder.close()


def test_implicit_acknowledgement_accepts_what_the_last_poll_returned(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _produce(bootstrap, topic, [f"i{n}" for n in range(5)])
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([topic])
    got = wait_until(lambda: _poll(consumer), "the records")
    assert len(got) == 5
    consumer.commit_sync()
    share = _share_partition(brook_broker, group, topic)
    wait_until(lambda: _state(brook_broker, share)[0] == 5, "the records accepted")
    consumer.close()


def test_read_committed_skips_aborted_records(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _group_config(bootstrap, group, share_isolation_level="read_committed")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("tx")})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(15)
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([topic])
    got = wait_until(lambda: _poll(consumer), "the committed record")
    assert [m.value() for m in got] == [b"committed"]
    assert _poll(consumer, 1.0) == []
    consumer.close()


def test_records_a_closed_connection_held_go_back_to_the_group(
    brook_broker: BrokerThread, share_group: tuple[str, str], tmp_path: Path
) -> None:
    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    _produce(bootstrap, topic, [f"k{n}" for n in range(10)])
    holder = _consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    holder.subscribe([topic])
    held = wait_until(lambda: _poll(holder), "the records")
    assert len(held) == 10
    share = _share_partition(brook_broker, group, topic)
    # Closing without acknowledging ends the share session: the records are released
    # (not counted as delivered) at once, not when their 30 s locks run out.
    holder.close()
    wait_until(lambda: _state(brook_broker, share)[2] == 0, "the records released")
    other = _consumer(bootstrap, group)
    other.subscribe([topic])
    again: list[Message] = []
    wait_until(lambda: again.extend(_poll(other)) or len(again) == 10, "the records again")
    assert sorted(m.value() for m in again) == sorted(m.value() for m in held)
    assert {m.delivery_count() for m in again} == {1}
    other.close()


def test_accepted_records_stay_accepted_after_the_broker_is_killed(brokers: Brokers) -> None:
    """SIGKILL with records in flight: what was accepted (answered once written to
    __share_group_state) is not delivered again; what was only acquired is."""
    broker = brokers.start({k.replace("_", "."): v for k, v in SHARE_CONFIG.items()})
    bootstrap = broker.bootstrap
    topic = _topic(bootstrap)
    group = _name("group")
    _group_config(bootstrap, group, share_auto_offset_reset="earliest")
    _produce(bootstrap, topic, [f"r{n}" for n in range(10)])
    consumer = _consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    got = wait_until(lambda: _poll(consumer), "the records")
    assert len(got) == 10
    for message in got[:5]:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync()
    broker.kill()
    consumer.close()
    restarted = brokers.restart(broker)
    other = _consumer(restarted.bootstrap, group)
    other.subscribe([topic])
    again: list[Message] = []
    wait_until(lambda: again.extend(_poll(other)) or len(again) >= 5, "the other records")
    assert sorted(m.value() for m in again) == [f"r{n}".encode() for n in range(5, 10)]
    assert _poll(other, 1.0) == []
    other.close()


HOLDER = """
import sys
from confluent_kafka import ShareConsumer

bootstrap, group, topic = sys.argv[1:4]
consumer = ShareConsumer(
    {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
)
consumer.subscribe([topic])
held = 0
while held < 10:
    held += len([m for m in consumer.poll(0.5) or [] if m.error() is None])
print(held, flush=True)
sys.stdin.read()  # holds the records, unacknowledged, until it is killed
"""


def test_a_consumer_killed_mid_batch_loses_nothing(
    brook_broker: BrokerThread, share_group: tuple[str, str]
) -> None:
    """SIGKILL of a share consumer holding records it has not acknowledged: its connection
    closes, its records go back at once (not counted as delivered), and another member
    gets every one of them."""
    import signal
    import subprocess
    import sys

    topic, group = share_group
    bootstrap = brook_broker.bootstrap
    values = [f"job-{n}" for n in range(10)]
    _produce(bootstrap, topic, values)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, bootstrap, group, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "10"
        share = _share_partition(brook_broker, group, topic)
        assert _state(brook_broker, share)[2] == 10  # all ten acquired by the holder
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
    other = _consumer(bootstrap, group)
    other.subscribe([topic])
    again: list[Message] = []
    wait_until(lambda: again.extend(_poll(other)) or len(again) >= 10, "the records again")
    other.close()
    assert sorted(m.value().decode() for m in again) == values
    assert {m.delivery_count() for m in again} == {1}


def test_by_duration_starts_a_new_group_at_the_records_of_that_time(
    brook_broker: BrokerThread,
) -> None:
    """share.auto.offset.reset=by_duration:PT1H: a new group starts at the first record
    of the last hour, skipping older ones."""
    bootstrap = brook_broker.bootstrap
    topic = _topic(bootstrap)
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"yesterday", timestamp=now_ms - 24 * 3600 * 1000)
    producer.produce(topic, b"two hours ago", timestamp=now_ms - 2 * 3600 * 1000)
    producer.produce(topic, b"a minute ago", timestamp=now_ms - 60 * 1000)
    producer.produce(topic, b"now", timestamp=now_ms)
    assert producer.flush(15) == 0
    group = _name("group")
    _group_config(bootstrap, group, share_auto_offset_reset="by_duration:PT1H")
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([topic])
    got: list[Message] = []
    wait_until(lambda: got.extend(_poll(consumer)) or len(got) >= 2, "the last hour's records")
    assert _poll(consumer, 1.0) == []
    consumer.close()
    assert [m.value() for m in got] == [b"a minute ago", b"now"]
