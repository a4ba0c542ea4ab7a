"""`brook configs --entity-type users`: users' SCRAM credentials, as kafka-configs.sh
manages them (through AlterUserScramCredentials and DescribeUserScramCredentials).

    brook configs --bootstrap-server HOST --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    brook configs --bootstrap-server HOST --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    brook configs --bootstrap-server HOST --describe --entity-type users [--entity-name alice]

The password never leaves this process: the admin client salts and hashes it (Kafka's
default 4096 iterations when none is given).
"""

from __future__ import annotations

import argparse

from .common import ToolError, connect
from .wire_client import ApiError

CLIENT_ID = "brook-configs"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default


def _mechanism(name: str) -> str:
    if name not in MECHANISMS:
        raise ToolError(
            f"{name} is not a user config brook configs can set: {', '.join(MECHANISMS)}",
            2,
        )
    return name


def _credential(mechanism: str, text: str) -> tuple[int, str]:
    """(iterations, password) of `iterations=N,password=P` (brackets taken off)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise ToolError(
                f"{mechanism}=[{text}]: expected [iterations=N,password=P] or [password=P]", 2
            )
        fields[key.strip()] = value
    if not fields.get("password"):
        raise ToolError(f"{mechanism} needs a password: {mechanism}=[password=...]", 2)
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ToolError(f"{mechanism}: iterations must be a number", 2) from None
    return iterations, fields["password"]


def alter(args: argparse.Namespace, user: str, sets: dict[str, str], deletes: list[str]) -> int:
    from .admin.scram_credentials import Deletion, Upsertion, alter_user_scram_credentials

    upsertions = []
    for mechanism, text in sets.items():
        iterations, password = _credential(mechanism, text)
        upsertions.append(Upsertion(user, _mechanism(mechanism), iterations, password))
    deletions = [Deletion(user, _mechanism(m)) for m in deletes]
    with connect(args, CLIENT_ID) as cluster:
        results = alter_user_scram_credentials(cluster, upsertions, deletions)
    for error in results.values():
        if error is not None:
            raise ToolError(f"cannot alter the SCRAM credentials of user {user!r}: {error}")
    print(f"Completed updating config for user {user}.")
    return 0


def describe(args: argparse.Namespace, user: str | None) -> int:
    from .admin.scram_credentials import describe_user_scram_credentials

    with connect(args, CLIENT_ID) as cluster:
        try:
            descriptions = describe_user_scram_credentials(cluster, [user] if user else None)
        except ApiError as exc:
            raise ToolError(f"cannot describe SCRAM credentials: {exc}") from None
    for name in sorted(descriptions):
        infos = ", ".join(
            f"{mechanism}=iterations={iterations}" for mechanism, iterations in descriptions[name]
        )
        print(f"SCRAM credential configs for user-principal '{name}' are {infos}")
    return 0
