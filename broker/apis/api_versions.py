"""ApiVersions (key 18), v0-v4: the served table, generated from protocol.api_table (or
from the emulated release's cut of it, broker/server/api_version_manager.py), and from v3 the
feature flags (broker/server/features.py).

An ApiVersions request of a version Brook does not know gets UNSUPPORTED_VERSION with
the supported list in a v0 body (see connection.py), so that the client can retry
with a version both sides know.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from brook.protocol.api_table import ApiKey, VersionRange
from brook.protocol.errors import ErrorCode

from ..server.features import FIRST_VERSION_LISTING_LEVEL_0
from ..server.request_context import RequestContext
from . import NO_THROTTLE, handles


def _api_list(entry_type: type, table: Mapping[ApiKey, VersionRange]) -> tuple[Any, ...]:
    entries = []
    for key in sorted(table):
        low, high = table[key].advertised
        entries.append(entry_type(api_key=int(key), min_version=low, max_version=high))
    return tuple(entries)


def unsupported_version_response(table: Mapping[ApiKey, VersionRange]) -> ApiVersionsResponseV0:
    return ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version, api_keys=_api_list(ApiVersionV0, table)
    )


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(ctx: RequestContext, request: object) -> object:
    versions = ctx.services.api_versions
    response_type = ctx.response_type
    types = sys.modules[response_type.__module__]
    fields = {"error_code": ErrorCode.none, "api_keys": _api_list(types.ApiVersion, versions.table)}
    if ctx.api_version >= 1:
        fields["throttle_time"] = NO_THROTTLE
    if ctx.api_version >= 3:
        fields["supported_features"] = tuple(
            types.SupportedFeatureKey(
                name=feature.name,
                min_version=feature.min_version,
                max_version=feature.max_version,
            )
            for feature in versions.features
            if feature.min_version > 0 or ctx.api_version >= FIRST_VERSION_LISTING_LEVEL_0
        )
        fields["finalized_features_epoch"] = versions.finalized_features_epoch
        fields["finalized_features"] = tuple(
            types.FinalizedFeatureKey(
                name=feature.name,
                max_version_level=feature.finalized_level,
                min_version_level=feature.finalized_level,
            )
            for feature in versions.features
            if feature.finalized_level > 0
        )
    return response_type(**fields)
