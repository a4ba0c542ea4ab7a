"""What Kafka's BrokerTopicMetrics and ISR meters count, per partition, as plain ints.

The produce and fetch paths add to these; /metrics sums them per topic when scraped
(collector.py), so a request pays a few integer additions and nothing else. They live
as long as the partition does on this broker: a deleted topic's counts go with it, as
Kafka removes a deleted topic's meters.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PartitionStats:
    # Appends as leader (clients' and coordinators'): records and bytes as produced.
    messages_in: int = 0
    bytes_in: int = 0
    # Record bytes sent to consumers, and to followers (ReplicationBytesOutPerSec).
    bytes_out: int = 0
    replication_bytes_out: int = 0
    # Record bytes a follower appended from its leader (ReplicationBytesInPerSec).
    replication_bytes_in: int = 0
    # Per-partition produce and fetch requests, and those that failed in a way Kafka
    # counts as failed (not for a missing partition or a moved leader: see the callers).
    produce_requests: int = 0
    failed_produce_requests: int = 0
    fetch_requests: int = 0
    failed_fetch_requests: int = 0
    # ISR changes this broker made as the partition's leader, once written.
    isr_shrinks: int = 0
    isr_expands: int = 0


def _codes(*names: str) -> frozenset[int]:
    from brook.protocol.errors import ErrorCode

    return frozenset(ErrorCode[name] for name in names)


# Errors that Kafka's ReplicaManager answers without marking FailedProduceRequestsPerSec
# (appendToLocalLog): the client's metadata is stale, or the batch itself is refused.
NOT_FAILED_PRODUCE = _codes(
    "unknown_topic_or_partition",
    "not_leader_or_follower",
    "message_too_large",
    "record_list_too_large",
    "corrupt_message",
    "kafka_storage_error",
    "unknown_topic_id",
)
# ... and FailedFetchRequestsPerSec (readFromLocalLog).
NOT_FAILED_FETCH = _codes(
    "unknown_topic_or_partition",
    "unknown_topic_id",
    "not_leader_or_follower",
    "unknown_leader_epoch",
    "fenced_leader_epoch",
    "replica_not_available",
    "kafka_storage_error",
    "offset_out_of_range",
    "inconsistent_topic_id",
)
