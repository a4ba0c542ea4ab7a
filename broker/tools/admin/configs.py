"""DescribeConfigs (v1, with synonyms) and IncrementalAlterConfigs (v0): a broker's own
configs at that broker, a topic's and the cluster-wide broker default at any broker, as
Kafka's AdminClient routes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from ..wire_client import KafkaCluster, Node

TOPIC, BROKER = 2, 4  # the resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs' operations
DEFAULT_CONFIG = 5  # the source of a value nobody set
# Kafka's names of the config sources (ConfigEntry.ConfigSource, librdkafka's for 0).
SOURCE_NAMES = {
    0: "UNKNOWN_CONFIG",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}

Resource = tuple[int, str]  # (resource type, name); broker "" is the cluster-wide default


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None  # None: sensitive (or unset)
    source: int
    is_sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


@dataclass(frozen=True)
class ResourceConfigs:
    error: ErrorCode
    message: str | None
    entries: dict[str, ConfigEntry] = field(default_factory=dict)


def source_name(source: int) -> str:
    return SOURCE_NAMES.get(source, "UNKNOWN_CONFIG")


def _destination(cluster: KafkaCluster, resource: Resource) -> Node | None:
    """A broker's own configs are asked of that broker; anything else of any broker."""
    kind, name = resource
    if kind == BROKER and name:
        return cluster.node(int(name))
    return None


def describe_configs(
    cluster: KafkaCluster, resources: Iterable[Resource]
) -> dict[Resource, ResourceConfigs]:
    from kio.schema.describe_configs.v1 import request as describe1

    by_node: dict[Node | None, list[Resource]] = {}
    for resource in dict.fromkeys(resources):
        by_node.setdefault(_destination(cluster, resource), []).append(resource)
    found: dict[Resource, ResourceConfigs] = {}
    for node, asked in by_node.items():
        response = cluster.request(
            node,
            describe1.DescribeConfigsRequest(
                resources=tuple(
                    describe1.DescribeConfigsResource(
                        resource_type=i8(kind), resource_name=name, configuration_keys=None
                    )
                    for kind, name in asked
                ),
                include_synonyms=True,
            ),
        )
        for result in response.results:
            found[(result.resource_type, result.resource_name)] = ResourceConfigs(
                result.error_code,
                result.error_message,
                {
                    entry.name: ConfigEntry(
                        name=entry.name,
                        value=entry.value,
                        source=entry.config_source,
                        is_sensitive=entry.is_sensitive,
                        read_only=entry.read_only,
                        synonyms=tuple(
                            ConfigSynonym(s.name, s.value, s.source) for s in entry.synonyms
                        ),
                    )
                    for entry in result.configs
                },
            )
    return found


def incremental_alter_configs(
    cluster: KafkaCluster,
    resource: Resource,
    sets: Mapping[str, str],
    deletes: Iterable[str],
) -> tuple[ErrorCode, str | None]:
    """SET `sets` and DELETE `deletes` of one resource: its error code and message."""
    from kio.schema.incremental_alter_configs.v0 import request as alter0

    kind, name = resource
    changes = [
        alter0.AlterableConfig(name=key, config_operation=i8(SET), value=value)
        for key, value in sets.items()
    ] + [
        alter0.AlterableConfig(name=key, config_operation=i8(DELETE), value=None) for key in deletes
    ]
    response = cluster.request(
        _destination(cluster, resource),
        alter0.IncrementalAlterConfigsRequest(
            resources=(
                alter0.AlterConfigsResource(
                    resource_type=i8(kind), resource_name=name, configs=tuple(changes)
                ),
            ),
            validate_only=False,
        ),
    )
    (result,) = response.responses
    return result.error_code, result.error_message
