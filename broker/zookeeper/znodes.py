"""Kafka's znode layout and the JSON of each znode (Kafka's kafka.zk.ZkData), so that a
Kafka tool or a person with zookeeper-shell reads a Brook cluster as a Kafka cluster.

Jackson writes Kafka's JSON without spaces; so does encode here. Decoding takes what
Kafka wrote too (older broker registration versions included).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brook.storage.checkpoints import topic_id_from_string, topic_id_to_string

from ..metadata.records import BrokerEndpoint, RegisterBrokerRecord

# --- the layout -------------------------------------------------------------------------

BROKERS = "/brokers"
BROKER_IDS = f"{BROKERS}/ids"
TOPICS = f"{BROKERS}/topics"
BROKER_SEQUENCE_ID = f"{BROKERS}/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER = "/cluster"
CLUSTER_ID = f"{CLUSTER}/id"
CONFIG = "/config"
CONFIG_CHANGES = f"{CONFIG}/changes"
ADMIN = "/admin"
DELETE_TOPICS = f"{ADMIN}/delete_topics"
REASSIGN_PARTITIONS = f"{ADMIN}/reassign_partitions"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONSUMERS = "/consumers"  # the old consumer's, still made by Kafka 3.x brokers
# Kafka's ConfigType.all: the entities with dynamic configs under /config.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG}/{entity_type}"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{config_entity_type_path(entity_type)}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# The persistent paths a Kafka broker makes at start where missing (ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(config_entity_type_path(entity) for entity in CONFIG_ENTITY_TYPES),
)


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _decode(data: bytes | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError):
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"Failed to parse {what}: {(data or b'').decode(errors='replace')}")
    return value


# --- /brokers/ids/<id> ------------------------------------------------------------------

# The version Kafka 2.7+ writes: endpoints by listener name with their security
# protocols, rack, and the broker's supported features.
BROKER_INFO_VERSION = 5
NO_JMX_PORT = -1
IN_CONTROLLED_SHUTDOWN = "in_controlled_shutdown"
_ENDPOINT = re.compile(r"^(?P<name>[^:/]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


def connection_string(endpoint: BrokerEndpoint) -> str:
    """Kafka's EndPoint.connectionString: NAME://host:port, an IPv6 host in brackets."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.listener_name}://{host}:{endpoint.port}"


def encode_broker(
    broker: RegisterBrokerRecord,
    timestamp_ms: int,
    features: Mapping[str, tuple[int, int]] | None = None,
    jmx_port: int = NO_JMX_PORT,
) -> bytes:
    """A broker registration as Kafka 2.7+ writes it (BrokerIdZNode v5). The top-level
    host and port are the first PLAINTEXT endpoint's (null and -1 without one), for
    clients older than listener names."""
    plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, Any] = {
        "features": {
            name: {"min_version": low, "max_version": high}
            for name, (low, high) in (features or {}).items()
        },
        "listener_security_protocol_map": {
            e.listener_name: e.security_protocol for e in broker.endpoints
        },
        "endpoints": [connection_string(e) for e in broker.endpoints],
        "jmx_port": jmx_port,
        "port": plaintext.port if plaintext is not None else -1,
        "host": plaintext.host if plaintext is not None else None,
        "version": BROKER_INFO_VERSION,
        "timestamp": str(timestamp_ms),
    }
    if broker.rack is not None:
        value["rack"] = broker.rack
    if broker.in_controlled_shutdown:
        # Brook's own field, written only while the broker stops (Kafka's readers pass
        # over fields they do not know): every leader reads it through its watch.
        value[IN_CONTROLLED_SHUTDOWN] = True
    return _encode(value)


def decode_broker(broker_id: int, data: bytes | None) -> RegisterBrokerRecord:
    """A broker registration of any version Kafka wrote (1 to 5); ValueError when it
    is not one (Kafka: "Failed to parse ZooKeeper registration for broker <id>")."""
    what = f"ZooKeeper registration for broker {broker_id}"
    value = _decode(data, what)
    try:
        version = int(value["version"])
        endpoints: tuple[BrokerEndpoint, ...]
        if version < 1:
            raise ValueError(f"Unsupported version of broker registration: {data!r}")
        if version == 1:
            endpoints = (BrokerEndpoint("PLAINTEXT", value["host"], int(value["port"])),)
        else:
            protocols = value.get("listener_security_protocol_map") or {}
            endpoints = tuple(_endpoint(text, protocols) for text in value["endpoints"])
        rack = value.get("rack")
        return RegisterBrokerRecord(
            broker_id,
            endpoints,
            str(rack) if rack is not None else None,
            value.get(IN_CONTROLLED_SHUTDOWN) is True,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"Failed to parse {what}: {(data or b'').decode(errors='replace')} ({exc})"
        ) from None


def _endpoint(text: str, protocols: Mapping[str, str]) -> BrokerEndpoint:
    match = _ENDPOINT.match(text)
    if match is None:
        raise ValueError(f"Unable to parse {text} to a broker endpoint")
    name = match["name"]
    # Before listener names (v2, v3) the name is the security protocol's.
    protocol = protocols.get(name, name)
    return BrokerEndpoint(name, match["host"].strip("[]"), int(match["port"]), protocol)


# --- /controller, /controller_epoch -----------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    value = _decode(data, "the controller znode")
    try:
        return int(value["brokerid"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"Failed to parse the controller znode: {data!r}") from None


# Kafka makes /controller_epoch with 0, so that the first controller's epoch is 1
# (KafkaController.InitialControllerEpoch).
INITIAL_CONTROLLER_EPOCH = 1


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"Failed to parse the controller epoch: {data!r}") from None


# --- /cluster/id ------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    # Kafka writes the version as a string here (ClusterIdZNode.toJson).
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    value = _decode(data, "the cluster id json")
    cluster_id = value.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ValueError(f"Failed to parse the cluster id json {data!r}")
    return cluster_id


# --- /brokers/topics/<t> (TopicZNode) ---------------------------------------------------

# Kafka 2.8+ writes version 3 with the topic id; earlier versions lack it.
TOPIC_ZNODE_VERSION = 3


def encode_topic(
    topic_id: uuid.UUID,
    assignment: Mapping[int, Sequence[int]],
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> bytes:
    """A topic's assignment: partition -> replicas, the first the preferred leader; while
    a reassignment moves a partition, its replicas being added and removed (only the
    partitions that have some, as Kafka writes them)."""

    def moving(by_partition: Mapping[int, Sequence[int]] | None) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted((by_partition or {}).items()) if r}

    return _encode(
        {
            "partitions": {str(p): list(replicas) for p, replicas in sorted(assignment.items())},
            "topic_id": topic_id_to_string(topic_id),
            "adding_replicas": moving(adding),
            "removing_replicas": moving(removing),
            "version": TOPIC_ZNODE_VERSION,
        }
    )


def encode_topic_znode(topic: TopicZNode) -> bytes:
    assert topic.topic_id is not None
    return encode_topic(topic.topic_id, topic.partitions, topic.adding, topic.removing)


@dataclass(frozen=True, slots=True)
class TopicZNode:
    """What a topic's znode holds: its id (None when an older Kafka wrote none), each
    partition's replicas and, for partitions being reassigned, the replicas being added
    and removed."""

    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]]
    removing: dict[int, list[int]]


def decode_topic_znode(topic: str, data: bytes | None) -> TopicZNode:
    value = _decode(data, f"the assignment of topic {topic}")
    try:
        raw_id = value.get("topic_id")
        topic_id = topic_id_from_string(raw_id) if raw_id is not None else None

        def by_partition(key: str) -> dict[int, list[int]]:
            return {
                int(partition): [int(r) for r in replicas]
                for partition, replicas in (value.get(key) or {}).items()
            }

        return TopicZNode(
            topic_id,
            by_partition("partitions"),
            {p: r for p, r in by_partition("adding_replicas").items() if r},
            {p: r for p, r in by_partition("removing_replicas").items() if r},
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"Failed to parse the assignment of topic {topic}: {data!r} ({exc})"
        ) from None


def decode_topic(topic: str, data: bytes | None) -> tuple[uuid.UUID | None, dict[int, list[int]]]:
    """The topic id (None when an older Kafka wrote none) and the assignment."""
    znode = decode_topic_znode(topic, data)
    return znode.topic_id, znode.partitions


# --- /brokers/topics/<t>/partitions/<p>/state (TopicPartitionStateZNode) -------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Kafka's LeaderIsrAndControllerEpoch, with the znode's version (the partition epoch:
    every conditional write of the state is against it)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0


def encode_partition_state(
    leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int
) -> bytes:
    return _encode(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
        }
    )


def decode_partition_state(data: bytes | None, zk_version: int) -> PartitionState:
    value = _decode(data, "a partition state")
    try:
        return PartitionState(
            int(value["leader"]),
            int(value["leader_epoch"]),
            tuple(int(member) for member in value["isr"]),
            int(value["controller_epoch"]),
            zk_version,
        )
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"Failed to parse a partition state: {data!r}") from None


# --- /config/<type>/<name> and /config/changes (ConfigEntityZNode) ------------------------

CONFIG_CHANGE_PREFIX = "config_change_"


def encode_entity_config(configs: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(configs)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """Kafka reads a missing or empty config znode as no overrides."""
    if not data:
        return {}
    value = _decode(data, "an entity config")
    config = value.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"Failed to parse an entity config: {data!r}")
    return {str(key): str(item) for key, item in config.items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    """A change notification (version 2): which entity's config znode changed."""
    return _encode({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes | None) -> tuple[str, str] | None:
    """(entity type, name) of a version 2 notification; None for one that names none
    (version 1, which Kafka 2.x+ no longer writes)."""
    value = _decode(data, "a config change notification")
    path = value.get("entity_path")
    if not isinstance(path, str) or "/" not in path:
        return None
    entity_type, _, name = path.partition("/")
    return entity_type, name


# --- /latest_producer_id_block (ProducerIdBlockZNode) ------------------------------------


def encode_producer_id_block(broker_id: int, first: int, last: int) -> bytes:
    return _encode(
        {"version": 1, "broker": broker_id, "block_start": str(first), "block_end": str(last)}
    )


def decode_producer_id_block(data: bytes | None) -> tuple[int, int, int]:
    """(broker, first id, last id) of the block reserved last."""
    value = _decode(data, "the producerId block json")
    try:
        return int(value["broker"]), int(value["block_start"]), int(value["block_end"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"Failed to parse the producerId block json {data!r}") from None


# --- /admin/reassign_partitions (ReassignPartitionsZNode) -------------------------------


def encode_reassign_partitions(moves: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _encode(
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": partition, "replicas": list(replicas)}
                for (topic, partition), replicas in sorted(moves.items())
            ],
        }
    )


def decode_reassign_partitions(data: bytes | None) -> dict[tuple[str, int], list[int]]:
    """The moves an old tool (Kafka 2.x's kafka-reassign-partitions.sh --zookeeper) asked
    for: partition -> target replicas."""
    value = _decode(data, "the partition reassignment json")
    try:
        return {
            (str(entry["topic"]), int(entry["partition"])): [int(r) for r in entry["replicas"]]
            for entry in value.get("partitions") or []
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"Failed to parse the partition reassignment json: {data!r} ({exc})"
        ) from None
