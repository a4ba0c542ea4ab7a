"""Config changes of AlterConfigs and IncrementalAlterConfigs, checked and applied as Kafka does.

AlterConfigs replaces the whole set of a resource's configs (a topic's overrides, or
one layer of dynamic broker configs); IncrementalAlterConfigs applies SET, DELETE,
APPEND and SUBTRACT to the current set. Both then check the resulting set as a whole.
Kafka checks topic changes on its controller (bad values and unknown keys:
INVALID_CONFIG) and broker changes on the broker (INVALID_REQUEST, KAFKA-13609);
Brook gives the same errors in the same order. A change applies at once: a topic's
logs get their new config, and a broker change re-derives every topic's config.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import (
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)

from ..metadata.topics import validate_topic_name
from .broker_config import BROKER_CONFIGS, ConfigError
from .topic_config import TOPIC_CONFIGS, validate_topic_configs
from .values import config_to_string

if TYPE_CHECKING:
    from ..server.services import BrokerServices

log = logging.getLogger("brook.config_changes")


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    GROUP = 32


class OpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigChange:
    name: str
    value: str | None
    op: int = OpType.SET


def check_broker_name(services: BrokerServices, name: str) -> None:
    """A broker resource names this broker by id; another id is an error, as in Kafka."""
    try:
        broker_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if broker_id != services.broker_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {services.broker_id}, but received {name}"
        )


def alter_resource(
    services: BrokerServices,
    resource_type: int,
    resource_name: str,
    changes: Sequence[ConfigChange],
    validate_only: bool,
    incremental: bool,
) -> Awaitable[None] | None:
    """Check and (unless validate_only) apply one resource's changes; raises KafkaError.
    A topic's change is kept by the controller: the awaitable completes once it is."""
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [
        change.name
        for change in changes
        if change.value is None and not (incremental and change.op == OpType.DELETE)
    ]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
    for change in changes:
        if change.op not in OpType.__members__.values():
            raise InvalidRequestError(f"Unknown operations type {change.op}")
    if resource_type == ResourceType.BROKER:
        _alter_broker(services, resource_name, changes, validate_only, incremental)
        return None
    elif resource_type == ResourceType.TOPIC:
        return _alter_topic(services, resource_name, changes, validate_only, incremental)
    elif resource_type == ResourceType.GROUP:
        return _alter_group(services, resource_name, changes, validate_only, incremental)
    else:
        raise InvalidRequestError(f"Unknown resource type {resource_type}")


# --- topics -----------------------------------------------------------------------------


def _alter_topic(
    services: BrokerServices,
    name: str,
    changes: Sequence[ConfigChange],
    validate_only: bool,
    incremental: bool,
) -> Awaitable[None] | None:
    topic = services.metadata.get(name)
    current = (
        {key: config_to_string(value) for key, value in topic.configs.items()} if topic else {}
    )
    if incremental:
        new = _apply_topic_ops(current, changes)
    else:
        new = {change.name: change.value for change in changes}
    if not name:
        raise InvalidRequestError("Default topic resources are not allowed.")
    validate_topic_name(name)
    try:
        parsed = validate_topic_configs(new)
    except ConfigError as exc:
        raise InvalidConfigError(str(exc)) from None
    if topic is None:
        raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
    if validate_only:
        return None
    return _set_topic_configs(services, name, parsed, new)


async def _set_topic_configs(
    services: BrokerServices, name: str, parsed: dict[str, Any], new: Mapping[str, str | None]
) -> None:
    await services.controller.alter_topic_configs(name, parsed)
    log.info("Topic %s configs are now %s", name, dict(new))


def _apply_topic_ops(
    current: Mapping[str, str | None], changes: Sequence[ConfigChange]
) -> dict[str, str | None]:
    """Kafka's controller: APPEND and SUBTRACT start from the topic key's own default."""
    new = dict(current)
    for change in changes:
        if change.op == OpType.SET:
            new[change.name] = change.value
        elif change.op == OpType.DELETE:
            new.pop(change.name, None)
        else:
            key = TOPIC_CONFIGS.get(change.name)
            if key is None or key.type != "list":
                raise InvalidConfigError(
                    f"Can't {OpType(change.op).name} to key {change.name}"
                    " because its type is not LIST."
                )
            old = new.get(change.name)
            if old is None:
                old = config_to_string(key.default)
            parts = [part for part in (old or "").split(",") if part]
            new[change.name] = ",".join(_combine(parts, change))
    return new


# --- groups -----------------------------------------------------------------------------


def _alter_group(
    services: BrokerServices,
    name: str,
    changes: Sequence[ConfigChange],
    validate_only: bool,
    incremental: bool,
) -> Awaitable[None] | None:
    """A group's overrides (Kafka's GroupConfig): SET and DELETE, or the whole set."""
    if not name:
        raise InvalidRequestError("Group name must not be empty.")
    configs = services.group_configs
    current = {key: str(value) for key, value in configs.overrides(name).items()}
    if incremental:
        new: dict[str, str | None] = dict(current)
        for change in changes:
            if change.op == OpType.SET:
                new[change.name] = change.value
            elif change.op == OpType.DELETE:
                new.pop(change.name, None)
            else:
                raise InvalidConfigError(
                    f"Config value {OpType(change.op).name.lower()} is not allowed for config"
                    f" key: {change.name}"
                )
    else:
        new = {change.name: change.value for change in changes}
    checked = configs.validate(new)
    if validate_only:
        return None
    return _set_group_configs(services, name, checked)


async def _set_group_configs(
    services: BrokerServices, name: str, configs: Mapping[str, str]
) -> None:
    await services.group_config_store.replace(name, configs)
    log.info("Group %s configs are now %s", name, dict(configs))


# --- brokers ----------------------------------------------------------------------------


def _alter_broker(
    services: BrokerServices,
    name: str,
    changes: Sequence[ConfigChange],
    validate_only: bool,
    incremental: bool,
) -> None:
    per_broker = name != ""
    if per_broker:
        check_broker_name(services, name)
    dynamic = services.dynamic_config
    if incremental:
        props = _apply_broker_ops(dynamic.layer(per_broker), changes)
    else:
        # Null values were refused above.
        props = {change.name: change.value or "" for change in changes}
    dynamic.validate(props, per_broker)
    if validate_only:
        return
    # Every topic's logs follow the broker's new defaults (a reconfigurable of the broker).
    dynamic.replace(props, per_broker)


def _apply_broker_ops(
    current: Mapping[str, str], changes: Sequence[ConfigChange]
) -> dict[str, str]:
    """Kafka's broker: APPEND and SUBTRACT start from the broker key's default."""
    new = dict(current)
    for change in changes:
        if change.op == OpType.SET:
            new[change.name] = change.value or ""
        elif change.op == OpType.DELETE:
            new.pop(change.name, None)
        else:
            key = BROKER_CONFIGS.get(change.name)
            if key is None:
                raise InvalidConfigError(f"Unknown config name: {change.name}")
            verb = "append" if change.op == OpType.APPEND else "subtract"
            if key.type != "list":
                raise InvalidConfigError(
                    f"Config value {verb} is not allowed for config key: {change.name}"
                )
            old = new.get(change.name)
            if old is None:
                old = config_to_string(key.default) or ""
            parts = [part for part in old.split(",") if part]
            new[change.name] = ",".join(_combine(parts, change))
    return new


def _combine(parts: list[str], change: ConfigChange) -> list[str]:
    values = _split(change.value or "")
    if change.op == OpType.APPEND:
        return parts + [value for value in dict.fromkeys(values) if value not in parts]
    remaining = list(parts)
    for value in values:
        if value in remaining:
            remaining.remove(value)
    return remaining


def _split(text: str) -> list[str]:
    """Split on commas dropping trailing empty parts, as Java's String.split does."""
    parts = text.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts
