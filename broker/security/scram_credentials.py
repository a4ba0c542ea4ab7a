"""Where SCRAM credentials live: in ZooKeeper's /config/users/<user> when the broker has
a ZooKeeper (as Kafka stores them there, so every broker of the cluster sees the same
users: broker/zookeeper/scram_znodes.py), else in a metadata file of the first log
directory, replaced atomically.

The file holds what the znode holds, Kafka's strings per mechanism
({"version": 1, "users": {"alice": {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}}}).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from brook.storage.checkpoints import read_json, write_json

if TYPE_CHECKING:  # the SCRAM code loads with the first credential read, not at start
    from .scram import ScramCredential

    # user -> mechanism -> the new credential, or None to delete it.
    CredentialChanges = Mapping[str, Mapping[str, ScramCredential | None]]

SCRAM_CREDENTIALS_FILE = "brook-scram-credentials.json"


# Only for type checking: a Protocol class costs start-up time to create.
if TYPE_CHECKING:

    class ScramCredentialStore(Protocol):
        async def get(self, user: str, mechanism: str) -> ScramCredential | None: ...

        async def users(self) -> dict[str, dict[str, ScramCredential]]: ...

        async def alter(self, changes: CredentialChanges) -> None:
            """Apply every change, each user's all together."""
            ...


class LocalScramCredentialStore:
    """A single broker's credentials, kept in memory and written through to one file."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / SCRAM_CREDENTIALS_FILE
        self._users: dict[str, dict[str, ScramCredential]] | None = None

    def _load(self) -> dict[str, dict[str, ScramCredential]]:
        if self._users is None:
            from .scram import ScramCredential

            stored = read_json(self.path) or {}
            self._users = {
                user: {
                    mechanism: ScramCredential.from_kafka_string(text)
                    for mechanism, text in mechanisms.items()
                }
                for user, mechanisms in stored.get("users", {}).items()
            }
        return self._users

    async def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._load().get(user, {}).get(mechanism)

    async def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(mechanisms) for user, mechanisms in self._load().items()}

    async def alter(self, changes: CredentialChanges) -> None:
        users = {user: dict(mechanisms) for user, mechanisms in self._load().items()}
        for user, mechanisms in changes.items():
            own = users.setdefault(user, {})
            for mechanism, credential in mechanisms.items():
                if credential is None:
                    own.pop(mechanism, None)
                else:
                    own[mechanism] = credential
            if not own:
                del users[user]
        # Written before it is served: a crash leaves the old file or the new one whole.
        stored = {
            user: {m: c.to_kafka_string() for m, c in sorted(mechanisms.items())}
            for user, mechanisms in sorted(users.items())
        }
        write_json(self.path, {"version": 1, "users": stored}, pretty=True)
        self._users = users
