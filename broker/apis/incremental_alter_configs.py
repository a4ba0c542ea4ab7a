"""IncrementalAlterConfigs (key 44), v0-v1: SET, DELETE, APPEND, SUBTRACT per key.

For topics and dynamic broker configs (broker "" is the cluster-wide default, "<id>"
this broker). The checks and their errors are those of config_changes; a resource
named twice in one request fails with INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, InvalidRequestError, KafkaError

from ..authorizer.checks import config_refusal
from ..authorizer.operations import AclOperation
from ..config.changes import ConfigChange, alter_resource
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .views import AlterConfigsResourceView, ConfigsAlterationView

log = logging.getLogger("brook.apis.alter_configs")

Resource = TypeVar("Resource", bound=AlterConfigsResourceView)


class IncrementalAlterableConfigView(Protocol):
    """A key's change (Kafka's AlterableConfig of IncrementalAlterConfigs)."""

    @property
    def name(self) -> str: ...
    @property
    def config_operation(self) -> int: ...
    @property
    def value(self) -> str | None: ...


class IncrementalAlterConfigsResourceView(AlterConfigsResourceView, Protocol):
    """A resource with the changes of its keys."""

    @property
    def configs(self) -> Sequence[IncrementalAlterableConfigView]: ...


IncrementalAlterConfigsRequestView: TypeAlias = ConfigsAlterationView[
    IncrementalAlterConfigsResourceView
]


if TYPE_CHECKING:
    from kio.schema.incremental_alter_configs import v0, v1

    def _served_requests_are_views(
        r0: v0.IncrementalAlterConfigsRequest, r1: v1.IncrementalAlterConfigsRequest
    ) -> list[IncrementalAlterConfigsRequestView]:
        return [r0, r1]


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequestView
) -> Any:
    return alter_all(
        ctx,
        request,
        lambda resource: [
            ConfigChange(c.name, c.value, c.config_operation) for c in resource.configs
        ],
        incremental=True,
    )


async def alter_all(
    ctx: RequestContext,
    request: ConfigsAlterationView[Resource],
    changes_of: Callable[[Resource], Sequence[ConfigChange]],
    incremental: bool,
) -> Any:
    """Both alter APIs: one result per resource, in request order."""
    types = schema_module(ctx.response_type)
    seen = [(r.resource_type, r.resource_name) for r in request.resources]
    responses = []
    for resource in request.resources:
        api = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
        try:
            if seen.count((resource.resource_type, resource.resource_name)) > 1:
                raise InvalidRequestError("Each resource must appear at most once.")
            refusal = config_refusal(
                ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name
            )
            if refusal is not None:
                responses.append(
                    build(
                        types.AlterConfigsResourceResponse,
                        error_code=refusal,
                        error_message=None,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
                continue
            pending = alter_resource(
                ctx.services,
                resource.resource_type,
                resource.resource_name,
                changes_of(resource),
                request.validate_only,
                incremental,
            )
            if pending is not None:
                await pending
            error, message = ErrorCode.none, None
        except KafkaError as exc:
            log.info(
                "%s of %s %r from %s failed: %s: %s",
                api,
                resource.resource_type,
                resource.resource_name,
                ctx.who,
                exc.error_code.name.upper(),
                exc.message,
            )
            error, message = exc.error_code, exc.message or None
        responses.append(
            build(
                types.AlterConfigsResourceResponse,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, responses=tuple(responses))
