"""AlterConfigs (key 33), v0-v2: replace all of a topic's overrides or a broker layer.

Keys left out of the request go back to their defaults, as in Kafka (this is why
Kafka deprecated it for IncrementalAlterConfigs). Each resource succeeds or fails on
its own; validate_only checks without changing anything.
"""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey

from ..config.changes import ConfigChange
from ..server.request_context import RequestContext
from . import handles
from .incremental_alter_configs import alter_all


@handles(ApiKey.ALTER_CONFIGS)
def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return alter_all(
        ctx,
        request,
        lambda resource: [ConfigChange(c.name, c.value) for c in resource.configs],
        incremental=False,
    )
