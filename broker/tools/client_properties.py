"""The client properties a tool's --command-config may hold.

The tools read security.protocol, the sasl.* and ssl.* keys (in librdkafka's names and
in Kafka's Java client's, broker/security/client_security.py) and client.id. A file
written for kafka-topics.sh or for a librdkafka client holds more, which the tools
accept and do not use; a name that neither client knows is refused, as the tools
refused it when they ran on librdkafka (a typo would otherwise go unnoticed).
"""

from __future__ import annotations

from collections.abc import Iterable

# librdkafka's configuration properties (2.x, global and topic ones) besides ssl.* and
# sasl.*, without the callbacks and pointers that only code can set.
LIBRDKAFKA_PROPERTIES = frozenset(
    [
        "acks",
        "allow.auto.create.topics",
        "api.version.fallback.ms",
        "api.version.request",
        "api.version.request.timeout.ms",
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "batch.num.messages",
        "batch.size",
        "bootstrap.servers",
        "broker.address.family",
        "broker.address.ttl",
        "broker.version.fallback",
        "builtin.features",
        "check.crcs",
        "client.dns.lookup",
        "client.id",
        "client.rack",
        "compression.codec",
        "compression.level",
        "compression.type",
        "connections.max.idle.ms",
        "consume.callback.max.messages",
        "coordinator.query.interval.ms",
        "debug",
        "delivery.report.only.error",
        "delivery.timeout.ms",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.gapless.guarantee",
        "enable.idempotence",
        "enable.metrics.push",
        "enable.partition.eof",
        "enable.random.seed",
        "enable.sasl.oauthbearer.unsecure.jwt",
        "enable.ssl.certificate.verification",
        "fetch.error.backoff.ms",
        "fetch.max.bytes",
        "fetch.message.max.bytes",
        "fetch.min.bytes",
        "fetch.queue.backoff.ms",
        "fetch.wait.max.ms",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "https.ca.location",
        "https.ca.pem",
        "interceptors",
        "internal.termination.signal",
        "isolation.level",
        "linger.ms",
        "log.connection.close",
        "log.queue",
        "log.thread.name",
        "log_level",
        "max.in.flight",
        "max.in.flight.requests.per.connection",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "max.poll.records",
        "message.copy.max.bytes",
        "message.max.bytes",
        "message.send.max.retries",
        "message.timeout.ms",
        "metadata.broker.list",
        "metadata.max.age.ms",
        "metadata.recovery.rebootstrap.trigger.ms",
        "metadata.recovery.strategy",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
        "partition.assignment.strategy",
        "partitioner",
        "plugin.library.paths",
        "produce.offset.report",
        "queue.buffering.backpressure.threshold",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.messages",
        "queue.buffering.max.ms",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "queuing.strategy",
        "receive.message.max.bytes",
        "reconnect.backoff.jitter.ms",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.required.acks",
        "request.timeout.ms",
        "retries",
        "retry.backoff.max.ms",
        "retry.backoff.ms",
        "security.protocol",
        "session.timeout.ms",
        "share.acknowledgement.mode",
        "socket.blocking.max.ms",
        "socket.connection.setup.timeout.ms",
        "socket.keepalive.enable",
        "socket.max.fails",
        "socket.nagle.disable",
        "socket.receive.buffer.bytes",
        "socket.send.buffer.bytes",
        "socket.timeout.ms",
        "statistics.interval.ms",
        "sticky.partitioning.linger.ms",
        "topic.blacklist",
        "topic.metadata.propagation.max.ms",
        "topic.metadata.refresh.fast.cnt",
        "topic.metadata.refresh.fast.interval.ms",
        "topic.metadata.refresh.interval.ms",
        "topic.metadata.refresh.sparse",
        "transaction.timeout.ms",
        "transactional.id",
    ]
)
# Kafka's admin client configs (AdminClientConfig) besides ssl.* and sasl.*.
KAFKA_ADMIN_PROPERTIES = frozenset(
    [
        "auto.include.jmx.reporter",
        "bootstrap.controllers",
        "bootstrap.servers",
        "client.dns.lookup",
        "client.id",
        "config.providers",
        "connections.max.idle.ms",
        "default.api.timeout.ms",
        "enable.metrics.push",
        "metadata.max.age.ms",
        "metadata.recovery.rebootstrap.trigger.ms",
        "metadata.recovery.strategy",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.timeout.ms",
        "retries",
        "retry.backoff.max.ms",
        "retry.backoff.ms",
        "security.protocol",
        "security.providers",
        "send.buffer.bytes",
        "socket.connection.setup.timeout.max.ms",
        "socket.connection.setup.timeout.ms",
    ]
)
# Families whose members both clients name (and add to, release by release).
SECURITY_PREFIXES = ("ssl.", "sasl.")


def unknown_properties(names: Iterable[str]) -> list[str]:
    """The names neither librdkafka nor Kafka's client knows, in the order given."""
    return [
        name
        for name in names
        if not name.startswith(SECURITY_PREFIXES)
        and name not in LIBRDKAFKA_PROPERTIES
        and name not in KAFKA_ADMIN_PROPERTIES
        # A config provider's own keys: config.providers.NAME.class and .param.KEY.
        and not name.startswith("config.providers.")
    ]
