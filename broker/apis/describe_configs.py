"""DescribeConfigs (key 32), v1-v4: topic, broker and group configs with source and synonyms.

A topic lists every topic key Brook knows; broker "<id>" (this broker only) every
broker key with the value in force; broker "" only the keys set as cluster-wide
dynamic defaults, as Kafka does; a group (resource type 32) every group key, its own
value or the broker's. Synonyms come only with include_synonyms, and the
documentation (v3+) only with include_documentation. An unknown topic gets
UNKNOWN_TOPIC_OR_PARTITION; another broker's id gets INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)

from ..authorizer.checks import config_refusal
from ..authorizer.operations import AclOperation
from ..config.describe import ConfigDescriber, ConfigEntry, only
from ..config.topic_config import effective_topic_config
from ..groups.group_configs import GROUP_CONFIG_RESOURCE
from ..metadata.topics import validate_topic_name
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.describe_configs")

TOPIC = 2
BROKER = 4


class DescribeConfigsResourceView(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def configuration_keys(self) -> Sequence[str] | None: ...


class DescribeConfigsRequestView(Protocol):
    """What the handler reads of a DescribeConfigsRequest in every served version; the
    include_documentation flag (v3+) is read where the version has it."""

    @property
    def resources(self) -> Sequence[DescribeConfigsResourceView]: ...
    @property
    def include_synonyms(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.describe_configs import v1, v2, v3, v4

    def _served_requests_are_views(
        r1: v1.DescribeConfigsRequest,
        r2: v2.DescribeConfigsRequest,
        r3: v3.DescribeConfigsRequest,
        r4: v4.DescribeConfigsRequest,
    ) -> list[DescribeConfigsRequestView]:
        return [r1, r2, r3, r4]


@handles(ApiKey.DESCRIBE_CONFIGS)
def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    describer = ConfigDescriber(ctx.services.dynamic_config)
    with_documentation = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        try:
            refusal = config_refusal(
                ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            if refusal is not None:
                entries, error, message = [], refusal, None
            else:
                entries = only(_describe(ctx, describer, resource), resource.configuration_keys)
                error, message = ErrorCode.none, None
        except KafkaError as exc:
            log.info(
                "DescribeConfigs of %s %r from %s failed: %s",
                resource.resource_type,
                resource.resource_name,
                ctx.who,
                exc.message or exc.error_code.name,
            )
            entries, error, message = [], exc.error_code, exc.message or None
        results.append(
            build(
                types.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(
                    _entry(types, entry, request.include_synonyms, with_documentation)
                    for entry in entries
                ),
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, results=tuple(results))


def _describe(
    ctx: RequestContext, describer: ConfigDescriber, resource: DescribeConfigsResourceView
) -> list[ConfigEntry]:
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        validate_topic_name(name)
        topic = ctx.services.metadata.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError()  # Kafka sends no message here
        return describer.topic(
            topic.configs, effective_topic_config(ctx.services.config, topic.configs)
        )
    if resource.resource_type == BROKER:
        if not name:
            return describer.cluster_default()
        try:
            broker_id = int(name)
        except ValueError:
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != ctx.services.broker_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {ctx.services.broker_id} or empty string,"
                f" but received {name}"
            )
        return describer.broker()
    if resource.resource_type == GROUP_CONFIG_RESOURCE:
        # Any group id: one without overrides is described with the broker's values.
        return ctx.services.group_configs.describe(name)
    raise InvalidRequestError(f"Unsupported resource type: {resource.resource_type}")


def _entry(
    types: ModuleType, entry: ConfigEntry, with_synonyms: bool, with_documentation: bool
) -> Any:
    synonyms = (
        tuple(
            build(types.DescribeConfigsSynonym, name=s.name, value=s.value, source=s.source)
            for s in entry.synonyms
        )
        if with_synonyms
        else ()
    )
    return build(
        types.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=entry.is_sensitive,
        synonyms=synonyms,
        config_type=entry.config_type,
        documentation=entry.documentation if with_documentation else None,
    )
