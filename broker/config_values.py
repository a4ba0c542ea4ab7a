"""Config values as Kafka prints them in DescribeConfigs and CreateTopics responses."""

from __future__ import annotations

from typing import Any


def config_to_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)
