"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials.

The client sends the salt and the salted password (never the password); the broker keeps
the salt, the iteration count, StoredKey and ServerKey, as Kafka does. Kafka's checks,
per user: a user changed twice in one request DUPLICATE_RESOURCE, an empty name
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations
outside 4096..16384 UNACCEPTABLE_CREDENTIAL, a deletion of a credential that does not
exist RESOURCE_NOT_FOUND. The valid users' changes are then written together; a refused
user's changes are not written at all.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..request_context import RequestContext
from ..security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from . import NO_THROTTLE, handles, schema_module

log = logging.getLogger("brook.security")

_TWICE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    store = ctx.services.scram_credentials
    stored = await store.users()
    errors: dict[str, tuple[ErrorCode, str]] = {}
    changes: dict[str, dict[str, ScramCredential | None]] = {}
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        if name in changes:
            del changes[name]
            errors[name] = (ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _check_name_and_mechanism(name, deletion.mechanism)
        mechanism = MECHANISM_BY_TYPE.get(deletion.mechanism, "")
        if error is None and mechanism not in stored.get(name, {}):
            error = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        if error is not None:
            errors[name] = error
        else:
            changes[name] = {mechanism: None}
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if name in changes:
            del changes[name]
            errors[name] = (ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _check_name_and_mechanism(name, upsertion.mechanism)
        if error is None and upsertion.iterations < MIN_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif error is None and upsertion.iterations > MAX_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too many iterations")
        if error is not None:
            errors[name] = error
            continue
        mechanism = MECHANISM_BY_TYPE[upsertion.mechanism]
        changes[name] = {
            mechanism: credential_from_salted_password(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
        }
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
