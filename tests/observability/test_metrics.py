"""GET /metrics under real client traffic: Kafka's names (as the JMX exporter's rules
name its MBeans) move as the broker serves, and only as Kafka would move them."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer

from brook.broker.testing import wait_until
from brook.protocol.record_batch import Record, build_batch
from tests.integration.clients import (
    aiokafka_producer,
    create_topic,
    kafka_python_producer,
    poll_until,
    produce,
)
from tests.integration.raw_client import RawClient, produce_request

from .conftest import Admin, Samples

BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
KCAT = shutil.which("kcat")
VALUE = b"x" * 100


def _produce_confluent(bootstrap: str, topic: str, count: int) -> None:
    produce(bootstrap, topic, [(None, VALUE)] * count)


def _produce_kafka_python(bootstrap: str, topic: str, count: int) -> None:
    producer = kafka_python_producer(bootstrap)
    try:
        for _ in range(count):
            producer.send(topic, VALUE, partition=0)
        producer.flush(30)
    finally:
        producer.close()


def _produce_aiokafka(bootstrap: str, topic: str, count: int) -> None:
    async def run() -> None:
        async with aiokafka_producer(bootstrap) as producer:
            for _ in range(count):
                await producer.send(topic, VALUE, partition=0)
            await producer.flush()

    asyncio.run(run())


def _produce_kcat(bootstrap: str, topic: str, count: int) -> None:
    if KCAT is None:
        pytest.skip("kcat is not installed (./test.sh installs Debian's kcat with apt-get)")
    lines = b"".join(VALUE + b"\n" for _ in range(count))
    done = subprocess.run(
        [KCAT, "-b", bootstrap, "-t", topic, "-p", "0", "-P"],
        input=lines,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


PRODUCERS = {
    "confluent-kafka": _produce_confluent,
    "kafka-python": _produce_kafka_python,
    "aiokafka": _produce_aiokafka,
    "kcat": _produce_kcat,
}


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_messages_and_bytes_in_count_what_each_client_produced(
    admin_broker: Admin, topic_name: str, client: str
):
    create_topic(admin_broker.broker.bootstrap, topic_name)
    before = admin_broker.metrics()
    assert before.value(MESSAGES_IN, topic=topic_name) == 0
    PRODUCERS[client](admin_broker.broker.bootstrap, topic_name, 50)
    after = wait_until(
        lambda: (m := admin_broker.metrics()).value(MESSAGES_IN, topic=topic_name) >= 50 and m,
        what="50 messages in",
    )
    assert after.value(MESSAGES_IN, topic=topic_name) == 50
    # Batches as produced: the records' bytes and the batch framing around them.
    assert after.value(BYTES_IN, topic=topic_name) > 50 * len(VALUE)
    # The all-topics meter (no topic label) holds them too, as Kafka's does.
    assert after.value(MESSAGES_IN) >= 50
    assert (
        after.value("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic_name)
        >= 1
    )
    assert (
        after.value("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic_name)
        == 0
    )
    produce_requests = [
        labels
        for labels in after.labelled("kafka_network_requestmetrics_requests_total")
        if labels["request"] == "Produce"
    ]
    assert produce_requests, "no Produce in RequestsPerSec"
    assert (
        after.value("kafka_network_requestmetrics_errors_total", request="Produce", error="NONE")
        >= 1
    )
    # The log itself, as kafka.log:type=Log reports it.
    assert after.value("kafka_log_log_logendoffset", topic=topic_name, partition=0) == 50
    assert after.value("kafka_log_log_size", topic=topic_name, partition=0) == after.value(
        BYTES_IN, topic=topic_name
    )


def test_bytes_out_counts_what_consumers_were_sent(admin_broker: Admin, topic_name: str):
    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, VALUE)] * 20)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic_name])
    try:
        assert len(poll_until(consumer, lambda out: len(out) >= 20, 30)) == 20
    finally:
        consumer.close()
    metrics = admin_broker.metrics()
    size = metrics.value("kafka_log_log_size", topic=topic_name, partition=0)
    assert metrics.value("kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name) >= size
    assert (
        metrics.value("kafka_server_brokertopicmetrics_replicationbytesout_total", topic=topic_name)
        == 0
    )
    # A consumer's fetches count under Fetch and FetchConsumer, never FetchFollower.
    requests = metrics.labelled("kafka_network_requestmetrics_requests_total")
    names = {labels["request"] for labels in requests}
    assert {"Fetch", "FetchConsumer", "JoinGroup", "SyncGroup"} <= names
    assert "FetchFollower" not in names
    assert (
        metrics.value("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer")
        >= 1
    )


def test_a_rejected_produce_counts_as_failed_with_its_error_code(
    admin_broker: Admin, topic_name: str
):
    create_topic(admin_broker.broker.bootstrap, topic_name)
    future = int(time.time() * 1000) + 2 * 3600 * 1000  # past log.message.timestamp.after.max.ms
    with RawClient(admin_broker.broker.port, client_id="late-clock") as client:
        response = client.request(
            produce_request(topic_name, 0, build_batch([Record(0, future, None, b"v")]))
        )
        assert response.responses[0].partition_responses[0].error_code.name == "invalid_timestamp"
        # A partition that does not exist: an error, but not a failed produce in Kafka's
        # sense (FailedProduceRequestsPerSec leaves stale metadata out).
        missing = client.request(
            produce_request(topic_name, 7, build_batch([Record(0, 0, None, b"v")]))
        )
        assert missing.responses[0].partition_responses[0].error_code.name == (
            "unknown_topic_or_partition"
        )
    metrics = admin_broker.metrics()
    errors = "kafka_network_requestmetrics_errors_total"
    assert metrics.value(errors, request="Produce", error="INVALID_TIMESTAMP") == 1
    assert metrics.value(errors, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert (
        metrics.value(
            "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic_name
        )
        == 1
    )
    assert metrics.value("kafka_server_brokertopicmetrics_failedproducerequests_total") == 1
    # Nothing was written.
    assert metrics.value(MESSAGES_IN, topic=topic_name) == 0
    assert metrics.value("kafka_log_log_logendoffset", topic=topic_name, partition=0) == 0


def test_consumer_lag_shows_once_a_consumer_stops(admin_broker: Admin, topic_name: str):
    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, VALUE)] * 10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "laggard",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic_name])
    try:
        assert len(poll_until(consumer, lambda out: len(out) >= 10, 30)) == 10
        consumer.commit(asynchronous=False)
        stable = admin_broker.metrics()
        assert stable.value("brook_group_state", group="laggard", state="Stable") == 1
        assert stable.value("kafka_consumergroup_members", consumergroup="laggard") == 1
        assert stable.value("kafka_server_groupmetadatamanager_numgroupsstable") == 1
        completed = "kafka_server_group_coordinator_metrics_group_completed_rebalance_count"
        assert stable.value(completed) >= 1
    finally:
        consumer.close()
    produce(bootstrap, topic_name, [(None, VALUE)] * 7)
    labels = {"consumergroup": "laggard", "topic": topic_name, "partition": 0}
    metrics = wait_until(
        lambda: (m := admin_broker.metrics()).value("kafka_consumergroup_lag", **labels) == 7 and m,
        what="a lag of 7",
    )
    assert metrics.value("kafka_consumergroup_current_offset", **labels) == 10
    # The consumer left: its group is empty now, and lists as such.
    assert metrics.value("brook_group_state", group="laggard", state="Empty") == 1
    assert metrics.value("kafka_server_groupmetadatamanager_numgroupsempty") == 1
    assert metrics.value("kafka_consumergroup_members", consumergroup="laggard") == 0


@pytest.mark.brook_config(
    group_consumer_min_heartbeat_interval_ms=100, group_consumer_heartbeat_interval_ms=100
)
def test_consumer_groups_of_kip_848_count_by_state_and_protocol(
    admin_broker: Admin, topic_name: str
):
    """Kafka's group-coordinator metrics of the new groups: group-count by protocol,
    consumer-group-count by state (lower-cased, as Kafka tags it), consumer-group-rebalance-count;
    their members, offsets and lag as any group's."""
    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, VALUE)] * 4)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic_name])
    try:
        assert len(poll_until(consumer, lambda out: len(out) >= 4, 30)) == 4
        consumer.commit(asynchronous=False)
        coordinator = "kafka_server_group_coordinator_metrics_"
        stable = wait_until(
            lambda: (
                (m := admin_broker.metrics()).value(
                    coordinator + "consumer_group_count", state="stable"
                )
                == 1
                and m
            ),
            what="one stable consumer group",
        )
        assert stable.value(coordinator + "group_count", protocol="consumer") == 1
        assert stable.value(coordinator + "group_count", protocol="classic") == 0
        assert stable.value(coordinator + "consumer_group_count", state="reconciling") == 0
        assert stable.value(coordinator + "consumer_group_rebalance_count") >= 1
        assert stable.value("brook_group_state", group="kip848", state="Stable") == 1
        assert stable.value("kafka_consumergroup_members", consumergroup="kip848") == 1
        labels = {"consumergroup": "kip848", "topic": topic_name, "partition": 0}
        assert stable.value("kafka_consumergroup_current_offset", **labels) == 4
    finally:
        consumer.close()
    empty = wait_until(
        lambda: (
            (m := admin_broker.metrics()).value(
                "kafka_server_group_coordinator_metrics_consumer_group_count", state="empty"
            )
            == 1
            and m
        ),
        what="the consumer group to be empty once its member left",
    )
    assert empty.value("kafka_consumergroup_members", consumergroup="kip848") == 0


def test_transactions_count_by_state(admin_broker: Admin, topic_name: str):
    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-metrics"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, VALUE, partition=0)
    producer.flush(30)
    ongoing = admin_broker.metrics()
    assert ongoing.value("brook_transaction_coordinator_transactions", state="Ongoing") == 1
    producer.commit_transaction(30)
    committed = wait_until(
        lambda: (
            (m := admin_broker.metrics()).get(
                "brook_transaction_coordinator_transactions", state="CompleteCommit"
            )
            == 1
            and m
        ),
        what="the transaction's CompleteCommit",
    )
    assert committed.get("brook_transaction_coordinator_transactions", state="Ongoing") is None


def test_connections_are_counted_per_listener(admin_broker: Admin):
    connections = "kafka_server_socket_server_metrics_connection_count"
    labels = {"listener": "PLAINTEXT", "networkProcessor": 0}
    before = admin_broker.metrics()
    opened = before.get(connections, **labels) or 0
    created = (
        before.get("kafka_server_socket_server_metrics_connection_creation_total", **labels) or 0
    )
    with RawClient(admin_broker.broker.port) as client:
        client.request(produce_request("unused-topic", 0, build_batch([Record(0, 0, None, b"v")])))
        during = admin_broker.metrics()
        assert during.value(connections, **labels) == opened + 1
        assert (
            during.value("kafka_server_socket_server_metrics_connection_creation_total", **labels)
            == created + 1
        )
    wait_until(
        lambda: admin_broker.metrics().value(connections, **labels) == opened,
        what="the connection to be counted closed",
    )


@pytest.mark.brook_config(log_flush_interval_messages=1)
def test_log_flushes_are_timed(admin_broker: Admin, topic_name: str):
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    before = admin_broker.metrics().value(flushes)
    create_topic(admin_broker.broker.bootstrap, topic_name)
    produce(admin_broker.broker.bootstrap, topic_name, [(None, VALUE)] * 3)
    # flush.messages=1: the flusher syncs the log after the writes (it runs every second).
    wait_until(lambda: admin_broker.metrics().value(flushes) > before, what="a timed flush")


def test_the_broker_and_its_loop_report_themselves(admin_broker: Admin):
    metrics = admin_broker.metrics()
    assert metrics.value("kafka_server_kafkaserver_brokerstate") == 3  # RUNNING
    assert metrics.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert metrics.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert metrics.value("brook_eventloop_lag_seconds") >= 0
    # The loop-lag task measures every quarter second: its histogram fills.
    wait_until(
        lambda: admin_broker.metrics().value("brook_eventloop_lag_ms_count") > 0,
        what="an event-loop lag measurement",
    )
    # The process's own numbers, from the client library's collectors.
    assert metrics.value("process_resident_memory_bytes") > 0
    assert metrics.types["kafka_network_requestmetrics_totaltimems"] == "histogram"
    assert metrics.types["kafka_server_brokertopicmetrics_bytesin"] == "counter"


def test_request_times_are_histograms_with_every_stage(admin_broker: Admin, topic_name: str):
    produce(admin_broker.broker.bootstrap, topic_name, [(None, VALUE)] * 5, acks="all")
    metrics = admin_broker.metrics()
    for stage in ("total", "requestqueue", "local", "remote", "responsesend"):
        name = f"kafka_network_requestmetrics_{stage}timems"
        count = metrics.value(name + "_count", request="Produce")
        assert count >= 1
        buckets = sorted(
            (float(labels["le"]), metrics.value(name + "_bucket", **labels))
            for labels in metrics.labelled(name + "_bucket")
            if labels["request"] == "Produce"
        )
        counts = [value for _, value in buckets]
        assert counts == sorted(counts) and counts[-1] == count  # cumulative, +Inf = all


def test_metrics_answer_while_the_broker_is_under_load(admin_broker: Admin, topic_name: str):
    """Scrapes between the requests of a producer sending as fast as it can: each answers,
    and each sees more messages than the last."""
    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name)
    stop = threading.Event()
    sent: list[int] = [0]

    def load() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        while not stop.is_set():
            for _ in range(1000):
                try:
                    producer.produce(topic_name, VALUE, partition=0)
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            sent[0] += 1000
        producer.flush(30)

    thread = threading.Thread(target=load)
    thread.start()
    try:
        wait_until(
            lambda: admin_broker.metrics().value(MESSAGES_IN, topic=topic_name) > 0,
            what="the load to start",
        )
        seen = []
        for _ in range(10):
            seen.append(admin_broker.metrics().value(MESSAGES_IN, topic=topic_name))
            wait_until(
                lambda: admin_broker.metrics().value(MESSAGES_IN, topic=topic_name) > seen[-1],
                what="more messages in",
            )
        assert seen == sorted(seen) and len(set(seen)) == len(seen)
    finally:
        stop.set()
        thread.join(60)


def test_samples_parse_as_prometheus_text(admin_broker: Admin):
    """Every line is one Prometheus' parser takes (no duplicate series either)."""
    _, _, text = admin_broker.get("/metrics")
    series = [line.split(" ")[0] for line in text.splitlines() if line and line[0] != "#"]
    assert len(series) == len(set(series))
    assert Samples(text).samples


def test_unknown_admin_paths_are_404(admin_broker: Admin):
    status, body = admin_broker.json("/metricz")
    assert status == 404 and "No such path" in body["error"]


@pytest.mark.brook_config(
    group_share_min_heartbeat_interval_ms=200,
    group_share_heartbeat_interval_ms=200,
    group_share_min_record_lock_duration_ms=1000,
)
def test_share_groups_count_acknowledgements_lock_timeouts_and_sessions(
    admin_broker: Admin, topic_name: str
) -> None:
    """Share groups (KIP-932): share-group-count by state, RecordAcknowledgementsPerSec
    by ackType, AcquisitionLockTimeoutPerSec, InFlightMessageCount and the share
    session cache, as Kafka's JMX exporter names them."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    bootstrap = admin_broker.broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, VALUE)] * 3)
    resource = ConfigResource(ConfigResource.Type.GROUP, "queue")
    for name, value in (
        ("share.auto.offset.reset", "earliest"),
        ("share.record.lock.duration.ms", "1000"),
    ):
        resource.add_incremental_config(
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(15)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "queue",
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic_name])
    try:
        got = wait_until(
            lambda: [m for m in consumer.poll(0.5) or [] if m.error() is None], "records"
        )
        assert len(got) == 3
        consumer.acknowledge(got[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(got[1], AcknowledgeType.REJECT)
        consumer.acknowledge(got[2], AcknowledgeType.RELEASE)
        consumer.commit_sync()
        # The released record comes again; unacknowledged, its lock runs out.
        again = wait_until(
            lambda: [m for m in consumer.poll(0.5) or [] if m.error() is None], "again"
        )
        assert len(again) == 1
        share = "kafka_server_sharegroupmetrics_recordacknowledgementspersec_total"
        metrics = wait_until(
            lambda: (
                (m := admin_broker.metrics()).value(
                    "kafka_server_sharepartitionmetrics_acquisitionlocktimeoutpersec_total"
                )
                == 1
                and m
            ),
            what="the lock of the record delivered again to run out",
        )
        assert metrics.value(share, acktype="Accept") == 1
        assert metrics.value(share, acktype="Reject") == 1
        assert metrics.value(share, acktype="Release") == 1
        assert metrics.value("brook_share_records_acquired_total") == 4
        coordinator = "kafka_server_group_coordinator_metrics_"
        assert metrics.value(coordinator + "share_group_count", state="stable") == 1
        assert metrics.value(coordinator + "group_count", protocol="share") == 1
        assert metrics.value("kafka_server_sharesessioncache_sharesessionscount") == 1
        assert metrics.value("kafka_server_sharesessioncache_sharepartitionscount") == 1
        labels = {"group": "queue", "topic": topic_name, "partition": 0}
        assert (
            metrics.value("kafka_server_sharepartitionmetrics_inflightmessagecount", **labels) == 1
        )
    finally:
        consumer.close()
