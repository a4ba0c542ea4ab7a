"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials.

The client sends the salt and the salted password (never the password); the broker keeps
the salt, the iteration count, StoredKey and ServerKey, as Kafka does. The checks are those
of Kafka's ZooKeeper mode (ZkAdminManager), whose storage Brook shares: per user, an empty
name UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations
outside 4096..16384 UNACCEPTABLE_CREDENTIAL, the same user and mechanism twice in one
request DUPLICATE_RESOURCE, a deletion of a credential that does not exist
RESOURCE_NOT_FOUND. One mechanism of a user may be set and another deleted in the same
request (KRaft refuses that as a duplicate; ZooKeeper mode applies both). A user with any
refused change has none of its changes written; the others are written together.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from ..server.request_context import RequestContext
from . import NO_THROTTLE, handles, schema_module

log = logging.getLogger("brook.security")

_TWICE = "A user credential cannot be altered twice in the same request"


class ScramCredentialDeletionView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def mechanism(self) -> int: ...


class ScramCredentialUpsertionView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def mechanism(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def salt(self) -> bytes: ...
    @property
    def salted_password(self) -> bytes: ...


class AlterUserScramCredentialsRequestView(Protocol):
    """What the handler reads of an AlterUserScramCredentialsRequest (v0, the one served)."""

    @property
    def deletions(self) -> Sequence[ScramCredentialDeletionView]: ...
    @property
    def upsertions(self) -> Sequence[ScramCredentialUpsertionView]: ...


if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials import v0

    def _served_requests_are_views(
        r0: v0.AlterUserScramCredentialsRequest,
    ) -> list[AlterUserScramCredentialsRequestView]:
        return [r0]


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequestView
) -> Any:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        # Every user named answered CLUSTER_AUTHORIZATION_FAILED, as Kafka does.
        types = schema_module(ctx.response_type)
        named = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        return ctx.response_type(
            throttle_time=NO_THROTTLE,
            results=tuple(
                types.AlterUserScramCredentialsResult(
                    user=name, error_code=ErrorCode.cluster_authorization_failed, error_message=None
                )
                for name in named
            ),
        )
    store = ctx.services.scram_credentials
    stored = await store.users()
    errors: dict[str, tuple[ErrorCode, str]] = {}
    changes: dict[str, dict[str, ScramCredential | None]] = {}
    pairs: list[tuple[str, int]] = []
    for deletion in request.deletions:
        error = _check_name_and_mechanism(deletion.name, deletion.mechanism)
        if error is not None:
            errors.setdefault(deletion.name, error)
        pairs.append((deletion.name, deletion.mechanism))
    for upsertion in request.upsertions:
        error = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
        if error is None and upsertion.iterations < MIN_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif error is None and upsertion.iterations > MAX_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too many iterations")
        if error is not None:
            errors.setdefault(upsertion.name, error)
        pairs.append((upsertion.name, upsertion.mechanism))
    for (user, _), count in Counter(pairs).items():
        if count > 1 and user not in errors:
            errors[user] = (ErrorCode.duplicate_resource, _TWICE)
    for deletion in request.deletions:
        mechanism = MECHANISM_BY_TYPE.get(deletion.mechanism, "")
        if deletion.name not in errors and mechanism not in stored.get(deletion.name, {}):
            errors[deletion.name] = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
    for deletion in request.deletions:
        if deletion.name not in errors:
            changes.setdefault(deletion.name, {})[MECHANISM_BY_TYPE[deletion.mechanism]] = None
    for upsertion in request.upsertions:
        if upsertion.name not in errors:
            mechanism = MECHANISM_BY_TYPE[upsertion.mechanism]
            changes.setdefault(upsertion.name, {})[mechanism] = credential_from_salted_password(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
    if changes:
        await store.alter(changes)
        for name, mechanisms in changes.items():
            for mechanism, credential in mechanisms.items():
                log.info(
                    "%s SCRAM credential of user %r (%s), asked by %s",
                    "Deleted" if credential is None else "Set",
                    name,
                    mechanism,
                    ctx.peer,
                )
    types = schema_module(ctx.response_type)
    results = [
        types.AlterUserScramCredentialsResult(
            user=name, error_code=ErrorCode.none, error_message=None
        )
        for name in changes
    ] + [
        types.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message)
        for name, (code, message) in errors.items()
    ]
    return ctx.response_type(throttle_time=NO_THROTTLE, results=tuple(results))
