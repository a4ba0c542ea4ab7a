"""Config values as Kafka prints them in DescribeConfigs and CreateTopics responses."""

from __future__ import annotations

import math
from typing import Any


def config_to_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it: plain between 10^-3 and 10^7,
    else one digit, a point and an exponent (1.7976931348623157E308, 1.0E7)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    from decimal import Decimal  # rare: not worth its import at start-up

    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"
