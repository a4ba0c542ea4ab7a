"""AlterConfigs (key 33), v0-v2: replace all of a topic's overrides or a broker layer.

Keys left out of the request go back to their defaults, as in Kafka (this is why
Kafka deprecated it for IncrementalAlterConfigs). Each resource succeeds or fails on
its own; validate_only checks without changing anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from brook.protocol.api_table import ApiKey

from ..config.changes import ConfigChange
from ..server.request_context import RequestContext
from . import handles
from .incremental_alter_configs import alter_all
from .views import AlterConfigsResourceView, ConfigsAlterationView


class AlterableConfigView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str | None: ...


class AlterConfigsRequestResourceView(AlterConfigsResourceView, Protocol):
    """A resource with the whole of its new configs."""

    @property
    def configs(self) -> Sequence[AlterableConfigView]: ...


AlterConfigsRequestView: TypeAlias = ConfigsAlterationView[AlterConfigsRequestResourceView]


if TYPE_CHECKING:
    from kio.schema.alter_configs import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.AlterConfigsRequest, r1: v1.AlterConfigsRequest, r2: v2.AlterConfigsRequest
    ) -> list[AlterConfigsRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.ALTER_CONFIGS)
def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequestView) -> Any:
    return alter_all(
        ctx,
        request,
        lambda resource: [ConfigChange(c.name, c.value) for c in resource.configs],
        incremental=False,
    )
