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
from typing import TYPE_CHECKING

from .common import ToolError, admin_client, describe_error, wait

if TYPE_CHECKING:
    from .kafka_admin import ScramMechanism, UserScramCredentialAlteration

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default


def _mechanism(name: str) -> ScramMechanism:
    from .kafka_admin import ScramMechanism

    if name not in MECHANISMS:
        raise ToolError(
            f"{name} is not a user config brook configs can set: {', '.join(MECHANISMS)}",
            2,
        )
    return ScramMechanism[name.replace("-", "_")]


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
    from .kafka_admin import (
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    changes: list[UserScramCredentialAlteration] = []
    for mechanism, text in sets.items():
        iterations, password = _credential(mechanism, text)
        changes.append(
            UserScramCredentialUpsertion(
                user,
                ScramCredentialInfo(_mechanism(mechanism), iterations),
                password.encode(),
            )
        )
    changes += [UserScramCredentialDeletion(user, _mechanism(m)) for m in deletes]
    admin = admin_client(args)
    futures = admin.alter_user_scram_credentials(changes, request_timeout=args.timeout)
    for future in futures.values():
        try:
            wait(future, args.timeout + 5, "altering SCRAM credentials")
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                f"cannot alter the SCRAM credentials of user {user!r}: {describe_error(exc)}"
            ) from None
    print(f"Completed updating config for user {user}.")
    return 0


def describe(args: argparse.Namespace, user: str | None) -> int:
    admin = admin_client(args)
    try:
        future = admin.describe_user_scram_credentials(
            [user] if user else None, request_timeout=args.timeout
        )
        if isinstance(future, dict):
            descriptions = {
                name: wait(f, args.timeout + 5, "describing") for name, f in future.items()
            }
        else:
            descriptions = wait(future, args.timeout + 5, "describing SCRAM credentials")
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"cannot describe SCRAM credentials: {describe_error(exc)}") from None
    for name in sorted(descriptions):
        infos = ", ".join(
            f"{info.mechanism.name.replace('_', '-')}=iterations={info.iterations}"
            for info in descriptions[name].scram_credential_infos
        )
        print(f"SCRAM credential configs for user-principal '{name}' are {infos}")
    return 0
