"""The checks request handlers make, as Kafka's AuthHelper makes them: every action allowed
when no authorizer is configured; else the request's principal and client host asked of
the authorizer, and each denial logged as Kafka's authorizer logger logs it."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from .acl import CLUSTER_NAME, PatternType, ResourceType, camel_name
from .operations import NOT_PROVIDED, SUPPORTED_OPERATIONS, AclOperation
from .operations import ResourceType as SupportedType

if TYPE_CHECKING:
    from ..server.request_context import RequestContext

log = logging.getLogger("brook.authorizer")

_SUPPORTED_KEY = {
    ResourceType.TOPIC: SupportedType.TOPIC,
    ResourceType.GROUP: SupportedType.GROUP,
    ResourceType.CLUSTER: SupportedType.CLUSTER,
}


def client_host(ctx: RequestContext) -> str:
    """The client's address as the ACLs name hosts (the peer without its port)."""
    return ctx.peer.rsplit(":", 1)[0]


def authorize(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    log_denial: bool = True,
) -> bool:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    principal, host = str(ctx.principal), client_host(ctx)
    allowed: bool = authorizer.authorize(principal, host, operation, resource_type, name)
    if not allowed and log_denial:
        log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s:%s"
            " for request = %s with clientId = %s",
            principal,
            camel_name(operation),
            host,
            resource_type.zk_name,
            PatternType.LITERAL.name,
            name,
            _api_name(ctx.api_key),
            ctx.client_id,
        )
    return allowed


def authorize_cluster(
    ctx: RequestContext, operation: AclOperation, log_denial: bool = True
) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denial)


def authorize_any_of_type(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the principal may do the operation on some resource of the type."""
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(
        str(ctx.principal), client_host(ctx), operation, resource_type
    )


def authorized(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    log_denial: bool = True,
) -> set[str]:
    """The names among `names` the principal may do the operation on."""
    return {
        name for name in set(names) if authorize(ctx, operation, resource_type, name, log_denial)
    }


def authorized_operations(
    ctx: RequestContext, resource_type: ResourceType, name: str, asked: bool
) -> int:
    """The bitfield of a resource's allowed operations for this request's principal (all
    the type supports without an authorizer), or NOT_PROVIDED when not asked for."""
    if not asked:
        return NOT_PROVIDED
    supported = SUPPORTED_OPERATIONS[_SUPPORTED_KEY[resource_type]]
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return sum(1 << operation for operation in supported)
    if not authorize(ctx, AclOperation.DESCRIBE, resource_type, name, log_denial=False):
        return 0  # Kafka tells nothing to whom may not even describe the resource
    return authorizer.authorized_operations(
        str(ctx.principal), client_host(ctx), resource_type, name, supported
    )


def _api_name(api_key: int) -> str:
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def denied(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> frozenset[str]:
    """The names among `names` the principal may NOT do the operation on (none at all,
    and nothing computed, without an authorizer)."""
    if ctx.services.authorizer is None:
        return frozenset()
    wanted = set(names)
    return frozenset(wanted - authorized(ctx, operation, resource_type, wanted))


# The config resource types of DescribeConfigs / AlterConfigs (ConfigResource.Type).
CONFIG_TOPIC = 2
CONFIG_BROKER = 4
CONFIG_BROKER_LOGGER = 8
CONFIG_GROUP = 32


def config_refusal(
    ctx: RequestContext, operation: AclOperation, config_type: int, name: str
) -> ErrorCode | None:
    """Kafka's check of a config resource: the operation (DescribeConfigs, AlterConfigs)
    on the topic, or on the cluster for a broker's configs; the error, or None."""
    if config_type == CONFIG_TOPIC:
        allowed = authorize(ctx, operation, ResourceType.TOPIC, name)
        return None if allowed else ErrorCode.topic_authorization_failed
    if config_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
        allowed = authorize_cluster(ctx, operation)
        return None if allowed else ErrorCode.cluster_authorization_failed
    if config_type == CONFIG_GROUP:
        allowed = authorize(ctx, operation, ResourceType.GROUP, name)
        return None if allowed else ErrorCode.group_authorization_failed
    return None
