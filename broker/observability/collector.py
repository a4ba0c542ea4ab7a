"""GET /metrics: the broker's numbers in Prometheus' text format, named as Prometheus'
JMX exporter names Kafka's MBeans with its usual Kafka rules (lowercased, `PerSec`
meters as `_total` counters), so that dashboards and alerts written for Kafka apply.
README.md ("Observability") has the table of names.

A scrape reads everything in one hop onto the broker's event loop (`take_snapshot`:
plain numbers, no I/O, no allocation per record) and builds the metric families on the
admin endpoint's thread. Nothing here runs on a produce or fetch: those only add to
ints (partition_stats.py, request_metrics.py).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from brook.protocol.errors import ErrorCode
from brook.storage.time_histogram import LOG_FLUSH_TIMES, TimeHistogram

from ..replica.partition import ReplicaRole
from .partition_stats import PartitionStats
from .request_metrics import STAGES, RequestMetrics

if TYPE_CHECKING:
    from ..server.services import BrokerServices
    from .loop_lag import LoopLagMonitor

__all__ = ["CONTENT_TYPE", "BrokerView", "MetricsEndpoint"]

# Prometheus' text format 0.0.4, which every Prometheus reads (the library's own "latest"
# type moves with its version; the names here need nothing newer).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# BrokerTopicMetrics' meters, each a PartitionStats field.
TOPIC_METERS = (
    ("messagesin", "messages_in", "Records appended as leader (MessagesInPerSec)"),
    ("bytesin", "bytes_in", "Record bytes appended as leader, as produced (BytesInPerSec)"),
    ("bytesout", "bytes_out", "Record bytes sent to consumers (BytesOutPerSec)"),
    (
        "replicationbytesin",
        "replication_bytes_in",
        "Record bytes appended from leaders (ReplicationBytesInPerSec)",
    ),
    (
        "replicationbytesout",
        "replication_bytes_out",
        "Record bytes sent to followers (ReplicationBytesOutPerSec)",
    ),
    (
        "totalproducerequests",
        "produce_requests",
        "Per-partition produce requests (TotalProduceRequestsPerSec)",
    ),
    (
        "failedproducerequests",
        "failed_produce_requests",
        "Per-partition produce requests that failed (FailedProduceRequestsPerSec)",
    ),
    (
        "totalfetchrequests",
        "fetch_requests",
        "Per-partition fetch reads (TotalFetchRequestsPerSec)",
    ),
    (
        "failedfetchrequests",
        "failed_fetch_requests",
        "Per-partition fetch reads that failed (FailedFetchRequestsPerSec)",
    ),
)

STAGE_METRICS = {
    "total": ("totaltimems", "Total time of a request (TotalTimeMs)"),
    "request_queue": (
        "requestqueuetimems",
        "Time from a request's arrival to its handler's start (RequestQueueTimeMs)",
    ),
    "local": ("localtimems", "Time in the request's handler (LocalTimeMs)"),
    "remote": (
        "remotetimems",
        "Time waiting after the handler: commits, long polls, groups (RemoteTimeMs)",
    ),
    "response_send": (
        "responsesendtimems",
        "Time to encode the response and hand it to the socket (ResponseSendTimeMs)",
    ),
}


@dataclass
class BrokerView:
    """The parts of a running broker that /metrics and /v1/ready read, on its loop."""

    broker_id: int
    services: Callable[[], BrokerServices | None]  # None until the broker has started
    connections: set[Any]  # KafkaConnection, each with its listener_name
    accepted: dict[str, int]  # connections accepted per listener
    request_metrics: RequestMetrics
    loop_lag: LoopLagMonitor
    state: Callable[[], int]  # a BrokerState


# --- the snapshot, taken on the loop ------------------------------------------------------


@dataclass
class _Family:
    kind: str  # counter, gauge, histogram
    name: str
    doc: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], Any]] = field(default_factory=list)

    def add(self, value: Any, *labels: Any) -> _Family:
        self.samples.append((tuple(str(label) for label in labels), value))
        return self


def _histogram(histogram: TimeHistogram) -> tuple[list[tuple[str, int]], float]:
    buckets = [
        ("+Inf" if bound == float("inf") else _bound(bound), count)
        for bound, count in histogram.cumulative()
    ]
    return buckets, histogram.sum_ms


def _bound(bound: float) -> str:
    return f"{bound:g}"


def take_snapshot(view: BrokerView) -> list[_Family]:
    """Every number /metrics shows, read at one moment on the broker's loop."""
    families: list[_Family] = [
        _Family("gauge", "kafka_server_kafkaserver_brokerstate", "Kafka's BrokerState").add(
            view.state()
        )
    ]
    services = view.services()
    families += _connections(view)
    families += _requests(view.request_metrics)
    families.append(
        _Family(
            "histogram",
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time of each fsync of a log's segments (LogFlushRateAndTimeMs)",
        ).add(_histogram(LOG_FLUSH_TIMES))
    )
    lag = view.loop_lag
    families += [
        _Family(
            "gauge", "brook_eventloop_lag_seconds", "How late the event loop ran a timer, last"
        ).add(lag.last_s),
        _Family(
            "gauge",
            "brook_eventloop_lag_max_seconds",
            "The largest event-loop lag since the previous scrape",
        ).add(lag.take_max()),
        _Family(
            "histogram", "brook_eventloop_lag_ms", "Event-loop lag measurements (milliseconds)"
        ).add(_histogram(lag.lags_ms)),
        _Family(
            "gauge",
            "brook_gil_switch_interval_seconds",
            "How long the event loop may wait for the GIL while another thread of the"
            " process runs (sys.getswitchinterval; `brook serve` lowers it while the log"
            " cleaner computes)",
        ).add(sys.getswitchinterval()),
    ]
    if services is not None:
        families += _authentications(services)
        families += _client_quotas(services)
        families += _partitions(services)
        families += _controller(services)
        families += _coordinators(services)
        families += _share_groups(services)
    return families


def _connections(view: BrokerView) -> list[_Family]:
    open_by_listener: dict[str, int] = defaultdict(int)
    for connection in view.connections:
        open_by_listener[connection.listener_name] += 1
    count = _Family(
        "gauge",
        "kafka_server_socket_server_metrics_connection_count",
        "Open client connections per listener (socket-server-metrics connection-count)",
        ("listener", "networkProcessor"),
    )
    created = _Family(
        "counter",
        "kafka_server_socket_server_metrics_connection_creation",
        "Connections accepted per listener (socket-server-metrics connection-creation-total)",
        ("listener", "networkProcessor"),
    )
    for listener in sorted(set(open_by_listener) | set(view.accepted)):
        count.add(open_by_listener.get(listener, 0), listener, 0)
        created.add(view.accepted.get(listener, 0), listener, 0)
    return [count, created]


def _authentications(services: Any) -> list[_Family]:
    """TLS handshakes and client certificates, SASL exchanges: per listener."""
    counts = services.listeners.authentications
    families = []
    for outcome, per_listener in (("successful", counts.succeeded), ("failed", counts.failed)):
        family = _Family(
            "counter",
            f"kafka_server_socket_server_metrics_{outcome}_authentication",
            f"{outcome.capitalize()} authentications per listener (socket-server-metrics"
            f" {outcome}-authentication-total)",
            ("listener", "networkProcessor"),
        )
        for listener in sorted(per_listener):
            family.add(per_listener[listener], listener, 0)
        families.append(family)
    return families


def _client_quotas(services: Any) -> list[_Family]:
    """Kafka's quota metrics per (user, client-id) sensor (type=Produce|Fetch|Request):
    the measured rate (byte-rate, request-time) and the throttle time answered (the
    average over throttled responses), for every sensor a quota made."""
    quotas = services.quotas
    if not quotas.enabled and not any(m.rates for m in quotas.managers()):
        return []
    now_ms = time.monotonic() * 1000
    families = []
    for manager in quotas.managers():
        prefix = f"kafka_server_{manager.quota_type.lower()}"
        measured = "request_time" if manager.quota_type == "Request" else "byte_rate"
        rate = _Family(
            "gauge",
            f"{prefix}_{measured}",
            f"{manager.quota_type} quota: the rate measured per user/client-id"
            f" ({measured.replace('_', '-')})",
            ("user", "client_id"),
        )
        throttle = _Family(
            "gauge",
            f"{prefix}_throttle_time",
            f"{manager.quota_type} quota: average throttle time answered, ms (throttle-time)",
            ("user", "client_id"),
        )
        for (user, client_id), sensor in sorted(manager.rates.items()):
            rate.add(sensor.measure(now_ms), user, client_id)
            total, count = manager.throttles.get((user, client_id), (0.0, 0.0))
            throttle.add(total / count if count else 0.0, user, client_id)
        families += [rate, throttle]
    return families


def _requests(metrics: RequestMetrics) -> list[_Family]:
    requests = _Family(
        "counter",
        "kafka_network_requestmetrics_requests",
        "Requests per API and version (RequestsPerSec)",
        ("request", "version"),
    )
    errors = _Family(
        "counter",
        "kafka_network_requestmetrics_errors",
        "Error codes in responses, per API (ErrorsPerSec; NONE counts answers without error)",
        ("request", "error"),
    )
    times = {
        stage: _Family("histogram", f"kafka_network_requestmetrics_{name}", doc, ("request",))
        for stage, (name, doc) in STAGE_METRICS.items()
    }
    for name, stats in sorted(metrics.apis.items()):
        for version, count in sorted(stats.requests.items()):
            requests.add(count, name, version)
        for code, count in sorted(stats.errors.items()):
            errors.add(count, name, _error_name(code))
        for stage in STAGES:
            times[stage].add(_histogram(stats.times[stage]), name)
    return [requests, errors, *times.values()]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def _partitions(services: BrokerServices) -> list[_Family]:
    replicas = services.replicas
    broker_id = services.broker_id
    per_topic: dict[str, list[int]] = {}
    meter_fields = [meter[1] for meter in TOPIC_METERS]
    size = _Family(
        "gauge", "kafka_log_log_size", "Bytes of a partition's log", ("topic", "partition")
    )
    end = _Family(
        "gauge",
        "kafka_log_log_logendoffset",
        "A partition's log end offset",
        ("topic", "partition"),
    )
    start = _Family(
        "gauge",
        "kafka_log_log_logstartoffset",
        "A partition's log start offset",
        ("topic", "partition"),
    )
    segments = _Family(
        "gauge",
        "kafka_log_log_numlogsegments",
        "Segments of a partition's log",
        ("topic", "partition"),
    )
    high_watermark = _Family(
        "gauge",
        "kafka_cluster_partition_highwatermark",
        "A partition's high watermark, as this broker knows it",
        ("topic", "partition"),
    )
    leaders = under_replicated = under_min_isr = at_min_isr = offline = 0
    shrinks = expands = produce_waiting = 0
    hosted = replicas.partitions()
    for partition in hosted:
        stats: PartitionStats = partition.stats
        totals = per_topic.get(partition.topic)
        if totals is None:
            totals = per_topic[partition.topic] = [0] * len(meter_fields)
        for i, name in enumerate(meter_fields):
            totals[i] += getattr(stats, name)
        shrinks += stats.isr_shrinks
        expands += stats.isr_expands
        produce_waiting += len(partition.commit_waiters)
        if partition.is_offline:
            offline += 1
            continue
        log = partition.log
        labels = (partition.topic, partition.index)
        size.add(log.size_in_bytes, *labels)
        end.add(log.log_end_offset, *labels)
        start.add(log.log_start_offset, *labels)
        segments.add(len(log.segments), *labels)
        high_watermark.add(log.high_watermark, *labels)
        if partition.role is ReplicaRole.LEADER and partition.leader_id == broker_id:
            leaders += 1
            isr, min_isr = len(partition.isr), log.config.min_insync_replicas
            under_replicated += isr < len(partition.replicas)
            under_min_isr += isr < min_isr
            at_min_isr += isr == min_isr
    families = [size, end, start, segments, high_watermark]
    for i, (name, _, doc) in enumerate(TOPIC_METERS):
        meter = _Family(
            "counter", f"kafka_server_brokertopicmetrics_{name}", doc + ", per topic", ("topic",)
        )
        for topic, totals in sorted(per_topic.items()):
            meter.add(totals[i], topic)
        families.append(meter)
        families.append(
            _Family("counter", f"kafka_server_brokertopicmetrics_{name}", doc + ", all topics").add(
                sum(totals[i] for totals in per_topic.values())
            )
        )
    replica_manager = "kafka_server_replicamanager_"
    families += [
        _Family("gauge", replica_manager + "partitioncount", "Partitions hosted").add(len(hosted)),
        _Family("gauge", replica_manager + "leadercount", "Partitions led").add(leaders),
        _Family(
            "gauge",
            replica_manager + "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replicas",
        ).add(under_replicated),
        _Family(
            "gauge",
            replica_manager + "underminisrpartitioncount",
            "Partitions led here whose ISR is smaller than min.insync.replicas",
        ).add(under_min_isr),
        _Family(
            "gauge",
            replica_manager + "atminisrpartitioncount",
            "Partitions led here whose ISR is exactly min.insync.replicas",
        ).add(at_min_isr),
        _Family(
            "gauge", replica_manager + "offlinereplicacount", "Replicas in a failed log dir"
        ).add(offline),
        _Family("counter", replica_manager + "isrshrinks", "ISR shrinks (IsrShrinksPerSec)").add(
            shrinks
        ),
        _Family("counter", replica_manager + "isrexpands", "ISR expands (IsrExpandsPerSec)").add(
            expands
        ),
    ]
    purgatory = _Family(
        "gauge",
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Requests waiting: acks=all appends for their commit, fetches for data",
        ("delayedOperation",),
    )
    purgatory.add(produce_waiting, "Produce")
    purgatory.add(len(services.fetch_purgatory.parked), "Fetch")
    families.append(purgatory)
    return families


def _controller(services: BrokerServices) -> list[_Family]:
    membership = services.membership
    active = membership.is_controller
    topics = list(services.metadata.topics())
    offline = 0
    if active:
        # As Kafka, only the active controller counts the partitions without a leader.
        offline = sum(1 for topic in topics for p in topic.partitions if p.leader < 0)
    prefix = "kafka_controller_kafkacontroller_"
    return [
        _Family("gauge", prefix + "activecontrollercount", "1 on the active controller").add(
            int(active)
        ),
        _Family("gauge", prefix + "offlinepartitionscount", "Partitions without a leader").add(
            offline
        ),
        _Family("gauge", prefix + "globaltopiccount", "Topics in the cluster").add(len(topics)),
        _Family("gauge", prefix + "globalpartitioncount", "Partitions in the cluster").add(
            sum(len(topic.partitions) for topic in topics)
        ),
        _Family("gauge", prefix + "activebrokercount", "Brokers registered").add(
            len(services.metadata.brokers())
        ),
    ]


GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
# Kafka 4's consumer groups (KIP-848); Kafka's metric tags them lower-cased.
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
SHARE_GROUP_STATES = ("Empty", "Stable")


def _share_groups(services: BrokerServices) -> list[_Family]:
    """Kafka's ShareGroupMetrics, SharePartitionMetrics and ShareSessionCache, as the JMX
    exporter names them, for the share partitions this broker leads."""
    acknowledgements = _Family(
        "counter",
        "kafka_server_sharegroupmetrics_recordacknowledgementspersec",
        "Records acknowledged by share-group members, by type (Accept, Release, Reject, Renew)",
        ("acktype",),
    )
    in_flight = _Family(
        "gauge",
        "kafka_server_sharepartitionmetrics_inflightmessagecount",
        "Records in flight of a share partition (end offset less start offset)",
        ("group", "topic", "partition"),
    )
    families = [acknowledgements, in_flight]
    share_partitions = services.share_partitions
    if not share_partitions.made:
        for name in ("Accept", "Release", "Reject", "Renew"):
            acknowledgements.add(0, name)
        stats = None
    else:
        manager = share_partitions.manager
        stats = manager.stats
        for name, count in stats.acknowledgements.items():
            acknowledgements.add(count, name)
        for (group_id, _, index), share in sorted(
            manager.share_partitions().items(),
            key=lambda item: (item[0][0], item[1].topic, item[0][2]),
        ):
            in_flight.add(share.in_flight(), group_id, share.topic, index)
    families += [
        _Family(
            "counter",
            "kafka_server_sharepartitionmetrics_acquisitionlocktimeoutpersec",
            "Records whose acquisition lock ran out before they were acknowledged",
        ).add(stats.lock_timeouts if stats else 0),
        _Family(
            "counter", "brook_share_records_acquired", "Records acquired by share-group members"
        ).add(stats.acquired if stats else 0),
        _Family(
            "gauge",
            "kafka_server_sharesessioncache_sharesessionscount",
            "Share sessions held (a share-group member fetching from this broker)",
        ).add(len(share_partitions.manager.sessions) if share_partitions.made else 0),
        _Family(
            "gauge",
            "kafka_server_sharesessioncache_sharepartitionscount",
            "Share partitions in the share sessions held",
        ).add(
            sum(len(s.partitions) for s in share_partitions.manager.sessions.sessions())
            if share_partitions.made
            else 0
        ),
    ]
    return families


def _coordinators(services: BrokerServices) -> list[_Family]:
    by_state = dict.fromkeys(GROUP_STATES, 0)
    manager = "kafka_server_groupmetadatamanager_"
    group_state = _Family(
        "gauge",
        "brook_group_state",
        "1 for each group, labelled with its state",
        ("group", "state"),
    )
    members = _Family(
        "gauge", "kafka_consumergroup_members", "Members of a group", ("consumergroup",)
    )
    current = _Family(
        "gauge",
        "kafka_consumergroup_current_offset",
        "A group's committed offset of a partition",
        ("consumergroup", "topic", "partition"),
    )
    lag = _Family(
        "gauge",
        "kafka_consumergroup_lag",
        "High watermark minus the group's committed offset, for partitions this broker leads",
        ("consumergroup", "topic", "partition"),
    )
    rebalances = completed = consumer_rebalances = offsets = 0
    consumer_by_state = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
    share_by_state = dict.fromkeys(SHARE_GROUP_STATES, 0)
    transactions: dict[str, int] = {}
    coordinators = services.coordinators
    if coordinators.made:
        groups = coordinators.groups
        rebalances = groups.rebalance_stats.rebalances
        completed = groups.rebalance_stats.completed_rebalances
        consumer_rebalances = groups.rebalance_stats.consumer_rebalances
        classic: list[Any] = list(groups.list_groups())
        consumer: list[Any] = list(groups.list_consumer_groups())
        for tally, kind in ((by_state, classic), (consumer_by_state, consumer)):
            for group in kind:
                tally[group.state.value] = tally.get(group.state.value, 0) + 1
        for share_group in groups.list_share_groups():
            share_by_state[share_group.state.value] += 1
        for group in classic + consumer:
            state = group.state.value
            group_state.add(1, group.group_id, state)
            members.add(len(group.members), group.group_id)
            offsets += len(group.offsets)
            for (topic, index), committed in sorted(group.offsets.items()):
                current.add(committed.offset, group.group_id, topic, index)
                partition = services.replicas.hosted(topic, index)
                if (
                    partition is not None
                    and not partition.is_offline
                    and partition.role is ReplicaRole.LEADER
                ):
                    lag.add(
                        max(partition.high_watermark - committed.offset, 0),
                        group.group_id,
                        topic,
                        index,
                    )
        from brook.coordinator_state.transaction_metadata import STATE_NAMES

        for metadata in coordinators.transactions.transactions():
            name = STATE_NAMES.get(metadata.state, str(metadata.state))
            transactions[name] = transactions.get(name, 0) + 1
    families = [
        _Family("gauge", manager + "numgroups", "Classic groups coordinated here").add(
            sum(by_state.values())
        ),
        _Family("gauge", manager + "numoffsets", "Committed offsets held").add(offsets),
    ]
    for state, count in by_state.items():
        families.append(
            _Family("gauge", manager + "numgroups" + state.lower(), f"Groups {state}").add(count)
        )
    coordinator = "kafka_server_group_coordinator_metrics_"
    by_protocol = _Family(
        "gauge", coordinator + "group_count", "Groups coordinated here, by protocol", ("protocol",)
    )
    by_protocol.add(sum(by_state.values()), "classic")
    by_protocol.add(sum(consumer_by_state.values()), "consumer")
    consumer_states = _Family(
        "gauge",
        coordinator + "consumer_group_count",
        "Consumer groups (KIP-848) coordinated here, by state",
        ("state",),
    )
    for state, count in consumer_by_state.items():
        consumer_states.add(count, state.lower())
    families += [
        group_state,
        members,
        current,
        lag,
        by_protocol,
        consumer_states,
        _Family(
            "gauge",
            coordinator + "consumer_group_rebalance_count",
            "New group epochs of consumer groups (KIP-848), each a new target assignment",
        ).add(consumer_rebalances),
        _Family(
            "gauge", coordinator + "group_rebalance_count", "Rebalances begun (classic groups)"
        ).add(rebalances),
        _Family(
            "gauge",
            coordinator + "group_completed_rebalance_count",
            "Generations formed (classic groups)",
        ).add(completed),
    ]
    share_states = _Family(
        "gauge",
        coordinator + "share_group_count",
        "Share groups (KIP-932) coordinated here, by state",
        ("state",),
    )
    for state, count in share_by_state.items():
        share_states.add(count, state.lower())
    by_protocol.add(sum(share_by_state.values()), "share")
    families.append(share_states)
    states = _Family(
        "gauge",
        "brook_transaction_coordinator_transactions",
        "Transactional ids coordinated here, by state",
        ("state",),
    )
    for name, count in sorted(transactions.items()):
        states.add(count, name)
    families.append(states)
    return families


# --- Prometheus ---------------------------------------------------------------------------


class _BrokerCollector(Collector):
    def __init__(self, snapshot: Callable[[], list[_Family]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        # Families of one name merge: a meter per topic and its all-topics total are one
        # metric, with and without the topic label, as the JMX exporter shows them.
        merged: dict[str, Metric] = {}
        for family in self._snapshot():
            metric = merged.get(family.name)
            if metric is None:
                metric = merged[family.name] = Metric(family.name, family.doc, family.kind)
            for values, value in family.samples:
                labels = dict(zip(family.labels, values, strict=True))
                _add_samples(metric, family, labels, value)
        yield from merged.values()


def _add_samples(metric: Metric, family: _Family, labels: dict[str, str], value: Any) -> None:
    name = family.name
    if family.kind == "counter":
        metric.add_sample(name + "_total", labels, value)
    elif family.kind == "histogram":
        buckets, total = value
        for bound, count in buckets:
            metric.add_sample(name + "_bucket", {**labels, "le": bound}, count)
        metric.add_sample(name + "_count", labels, buckets[-1][1])
        metric.add_sample(name + "_sum", labels, total)
    else:
        metric.add_sample(name, labels, value)


class MetricsEndpoint:
    """The registry /metrics serves: the broker's numbers and the process's own
    (process_cpu_seconds_total, process_resident_memory_bytes, python_gc_*)."""

    def __init__(self, snapshot: Callable[[], list[_Family]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(_BrokerCollector(snapshot))

    def render(self) -> bytes:
        return generate_latest(self.registry)
