"""Which API versions this broker advertises and serves (Kafka's ApiVersionManager).

Brook's own table (protocol/api_table.py) unless `brook.emulate.release` names an
Apache Kafka release: then that table cut to the release's ranges
(protocol/releases.py), and the release's features. ApiVersions answers from it and
every request is checked against it, so a version outside the emulated range gets what
an unserved version gets: UNSUPPORTED_VERSION with the list for ApiVersions, the
connection closed for the others.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from brook.protocol.api_table import SERVED, ApiKey, VersionRange
from brook.protocol.releases import RELEASE_RANGES

from .features import (
    FINALIZED_FEATURES_EPOCH,
    UNKNOWN_FINALIZED_FEATURES_EPOCH,
    Feature,
    features_of,
)

CONSUMER_PROTOCOL_APIS = frozenset(
    {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
)


def emulated_table(release: str) -> dict[ApiKey, VersionRange]:
    """Brook's served table cut to what `release` advertised.

    An API the release lacks, or whose range does not meet Brook's, is left out (a client
    sees it missing from ApiVersions, as it would against that release). Where Brook
    advertises below what it serves (Produce from v0), the advertised floor is cut the
    same way, so a request below the served floor still gets UNSUPPORTED_VERSION.
    """
    ranges = RELEASE_RANGES[release]
    table: dict[ApiKey, VersionRange] = {}
    for api_key, served in SERVED.items():
        released = ranges.get(api_key)
        if released is None:
            continue
        low, high = released
        max_version = min(served.max_version, high)
        min_version = max(served.min_version, low)
        advertised_min = max(served.advertised[0], low)
        if min_version > max_version:
            continue
        table[api_key] = VersionRange(
            min_version,
            max_version,
            advertised_min=advertised_min if advertised_min != min_version else None,
        )
    return table


class ApiVersionManager(NamedTuple):
    table: Mapping[ApiKey, VersionRange]
    features: tuple[Feature, ...]
    # The emulated Kafka release, or None for Brook's own ranges.
    release: str | None = None

    @classmethod
    def of(
        cls, release: str | None, rebalance_protocols: Collection[str] = ("classic", "consumer")
    ) -> ApiVersionManager:
        """The table of `release` (None: Brook's own), without the consumer group
        protocol's APIs where group.coordinator.rebalance.protocols leaves it out, as
        Kafka leaves them out of ApiVersions."""
        table = SERVED if release is None else emulated_table(release)
        if "consumer" not in rebalance_protocols:
            table = {api: r for api, r in table.items() if api not in CONSUMER_PROTOCOL_APIS}
        if release is None:
            return cls(table, features_of(None))
        return cls(table, features_of(release), release)

    @property
    def finalized_features_epoch(self) -> int:
        if any(feature.finalized_level > 0 for feature in self.features):
            return FINALIZED_FEATURES_EPOCH
        return UNKNOWN_FINALIZED_FEATURES_EPOCH
