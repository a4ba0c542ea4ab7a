"""DescribeUserScramCredentials (key 50), v0: each user's SCRAM mechanisms and iteration
counts (never a salt or key), from the broker's credential store (ZooKeeper's
/config/users or the local file: broker/security/scram_credentials.py).

No users named (null or empty): every user with a credential. A user named twice gets
DUPLICATE_RESOURCE, one without a credential RESOURCE_NOT_FOUND, with Kafka's messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..security.scram import SCRAM_MECHANISMS
from ..server.request_context import RequestContext
from . import NO_THROTTLE, handles, schema_module


class DescribeUserScramCredentialsUserNameView(Protocol):
    @property
    def name(self) -> str: ...


class DescribeUserScramCredentialsRequestView(Protocol):
    """What the handler reads of a DescribeUserScramCredentialsRequest: the users, null
    (or empty) for every one."""

    @property
    def users(self) -> Sequence[DescribeUserScramCredentialsUserNameView] | None: ...


if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials import v0

    def _served_requests_are_views(
        r0: v0.DescribeUserScramCredentialsRequest,
    ) -> list[DescribeUserScramCredentialsRequestView]:
        return [r0]


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return ctx.response_type(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            results=(),
        )
    stored = await ctx.services.scram_credentials.users()
    names = [user.name for user in request.users or ()]
    results = []
    if not names:
        names = sorted(stored)
    counts = Counter(names)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        if counts[name] > 1:
            error, message, infos = (
                ErrorCode.duplicate_resource,
                f"Cannot describe SCRAM credentials for the same user twice in a single"
                f" request: {name}",
                (),
            )
        elif name not in stored:
            error, message, infos = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {name}",
                (),
            )
        else:
            error, message = ErrorCode.none, None
            infos = tuple(
                types.CredentialInfo(
                    mechanism=SCRAM_MECHANISMS[mechanism][0], iterations=credential.iterations
                )
                for mechanism, credential in sorted(stored[name].items())
            )
        results.append(
            types.DescribeUserScramCredentialsResult(
                user=name, error_code=error, error_message=message, credential_infos=infos
            )
        )
    return ctx.response_type(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )
