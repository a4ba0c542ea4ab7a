"""Kafka's rules for topics: legal names, partition limits, manual replica assignments.

The topics themselves are in the MetadataCache (broker/metadata/); the controller
(broker/metadata/controller.py) changes them.
"""

from __future__ import annotations

import re

from brook.protocol.errors import (
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    PolicyViolationError,
)

MAX_NAME_LENGTH = 249
LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
# Kafka's controller refuses a CreateTopics that would add more partitions than this
# (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH, POLICY_VIOLATION, KAFKA-17870):
# each partition is files and descriptors, and a request for two billion of them would
# otherwise run the broker out of both. CreatePartitions gets the same bound
# (KAFKA-19673; before it, the controller's 10,000-record batch limit refused it).
MAX_PARTITIONS_PER_REQUEST = 10_000


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names (org.apache.kafka.common.internals.Topic)."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters,"
            f" topic name: {name}"
        )
    if not LEGAL_NAME.match(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII'
            " alphanumerics, '.', '_' and '-'"
        )


def check_partitions_per_request(total: int) -> None:
    """POLICY_VIOLATION for a request that would create too many partitions at once."""
    if total > MAX_PARTITIONS_PER_REQUEST:
        raise PolicyViolationError("Excessively large number of partitions per request.")


def validate_manual_assignment(
    broker_ids: list[int], replication_factor: int | None, registered: set[int]
) -> None:
    """Kafka's checks of one partition's replica list in a manual assignment."""
    if not broker_ids:
        raise InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in registered:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such"
                " broker is registered."
            )
        if broker_id == previous:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(broker_ids)}"
            " replica(s), but this is not consistent with previous partitions, which have"
            f" {replication_factor} replica(s)."
        )
