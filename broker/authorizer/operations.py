"""The operations a client may perform on a resource, as Kafka answers when asked.

Metadata (include_cluster_authorized_operations, include_topic_authorized_operations)
and DescribeGroups (include_authorized_operations) can ask for them: a bitfield with
bit n set for each allowed AclOperation of code n (Kafka's Utils.to32BitField). Without an
authorizer every operation a resource type supports is allowed, as in Kafka
(AuthHelper.authorizedOperations); with one, those the principal may do
(broker/authorizer/checks.py). Not asked for, the field is Int.MinValue: "not provided".
"""

from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.Enum):
    TOPIC = "topic"
    GROUP = "group"
    CLUSTER = "cluster"


NOT_PROVIDED = -(2**31)

# Kafka's AclEntry.supportedOperations of each resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
}
