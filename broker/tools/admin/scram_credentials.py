"""DescribeUserScramCredentials and AlterUserScramCredentials (v0), at any broker. The
password never leaves the tool: it is salted and hashed here, as Kafka's AdminClient
does, and only the salted password is sent."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from brook.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    SCRAM_MECHANISMS,
    salted_password,
)

from ..wire_client import ApiError, KafkaCluster, api_error

SALT_BYTES = 32


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int
    password: str


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: str


def describe_user_scram_credentials(
    cluster: KafkaCluster, users: list[str] | None
) -> dict[str, list[tuple[str, int]]]:
    """Each user's (mechanism, iterations); every user with a credential when `users` is
    None. A user asked for that has none raises ApiError (RESOURCE_NOT_FOUND)."""
    from kio.schema.describe_user_scram_credentials.v0 import request as describe0

    response = cluster.request_any(
        describe0.DescribeUserScramCredentialsRequest(
            users=None if users is None else tuple(describe0.UserName(name=u) for u in users)
        )
    )
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code, response.error_message)
    found: dict[str, list[tuple[str, int]]] = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise ApiError(result.error_code, result.error_message)
        found[result.user] = [
            (MECHANISM_BY_TYPE.get(info.mechanism, "UNKNOWN"), info.iterations)
            for info in result.credential_infos
        ]
    return found


def alter_user_scram_credentials(
    cluster: KafkaCluster, upsertions: list[Upsertion], deletions: list[Deletion]
) -> dict[str, ApiError | None]:
    """Set and delete credentials: each user's error (None: done)."""
    from kio.schema.alter_user_scram_credentials.v0 import request as alter0

    upserted = []
    for change in upsertions:
        salt = os.urandom(SALT_BYTES)
        # Iterations the broker refuses anyway are not spent hashing (a typo of 10**9
        # would hash for hours); the broker answers UNACCEPTABLE_CREDENTIAL.
        salted = b""
        if 0 < change.iterations <= MAX_ITERATIONS:
            salted = salted_password(change.mechanism, change.password, salt, change.iterations)
        upserted.append(
            alter0.ScramCredentialUpsertion(
                name=change.user,
                mechanism=i8(SCRAM_MECHANISMS[change.mechanism][0]),
                iterations=i32(change.iterations),
                salt=salt,
                salted_password=salted,
            )
        )
    response = cluster.request_any(
        alter0.AlterUserScramCredentialsRequest(
            deletions=tuple(
                alter0.ScramCredentialDeletion(
                    name=change.user, mechanism=i8(SCRAM_MECHANISMS[change.mechanism][0])
                )
                for change in deletions
            ),
            upsertions=tuple(upserted),
        )
    )
    return {
        result.user: api_error(result.error_code, result.error_message)
        for result in response.results
    }
