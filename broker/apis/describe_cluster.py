"""DescribeCluster (key 60), v0-v2: the live brokers and the controller, what Metadata
says of the cluster without its topics (Kafka's admin clients ask it from 2.8 on).

As Metadata does, it lists every live broker with its endpoint on the listener the
request came in on and its rack; none is fenced (Brook fences no broker). A broker is a
BROKER endpoint: asking it for the controllers (v1+) gets MISMATCHED_ENDPOINT_TYPE, an
unknown endpoint type UNSUPPORTED_ENDPOINT_TYPE, each with Kafka's message.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import CLUSTER_NAME, ResourceType
from ..authorizer.checks import authorized_operations
from ..authorizer.operations import NOT_PROVIDED
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.describe_cluster")

# KIP-919's endpoint types.
BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2
ENDPOINT_TYPE_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}
NO_CONTROLLER = -1


class DescribeClusterRequestView(Protocol):
    """What the handler reads of a DescribeClusterRequest in every served version; the
    endpoint type (v1+) is read where the version has it."""

    @property
    def include_cluster_authorized_operations(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.describe_cluster import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.DescribeClusterRequest, r1: v1.DescribeClusterRequest, r2: v2.DescribeClusterRequest
    ) -> list[DescribeClusterRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.DESCRIBE_CLUSTER)
def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequestView) -> Any:
    services = ctx.services
    asked = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    refusal = _refusal(asked)
    if refusal is not None:
        error, message = refusal
        log.info("DescribeCluster v%d from %s refused: %s", ctx.api_version, ctx.who, message)
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            endpoint_type=BROKER_ENDPOINT,
            cluster_id="",
            controller_id=NO_CONTROLLER,
            brokers=(),
            cluster_authorized_operations=NOT_PROVIDED,
        )
    types = schema_module(ctx.response_type)
    reachable = services.metadata.reachable_on(ctx.listener_name)
    controller_id = services.membership.controller_id
    if all(broker.broker_id != controller_id for broker, _ in reachable):
        # Kafka answers -1 rather than name a controller the list does not hold.
        controller_id = NO_CONTROLLER
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=services.cluster_id,
        controller_id=controller_id,
        brokers=tuple(
            build(
                types.DescribeClusterBroker,
                broker_id=broker.broker_id,
                host=endpoint.host,
                port=endpoint.port,
                rack=broker.rack,
                is_fenced=False,
            )
            for broker, endpoint in reachable
        ),
        cluster_authorized_operations=authorized_operations(
            ctx,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            request.include_cluster_authorized_operations,
        ),
    )


def _refusal(asked: int) -> tuple[ErrorCode, str] | None:
    if asked not in ENDPOINT_TYPE_NAMES:
        return ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {asked}"
    if asked != BROKER_ENDPOINT:
        return (
            ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint"
            f" of type {ENDPOINT_TYPE_NAMES[asked]}",
        )
    return None
