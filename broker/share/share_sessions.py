"""Share sessions (KIP-932): what one member of a share group fetches from this broker.

A member opens its session with epoch 0 and the partitions it wants, then sends each
next request with the epoch after the last one and only what changed (partitions added,
partitions forgotten); -1 closes the session, and the records it holds go back to the
group. A request with another epoch is INVALID_SHARE_SESSION_EPOCH, one for a session
this broker does not have SHARE_SESSION_NOT_FOUND, as Kafka's ShareSessionCache answers.
The cache holds at most group.share.max.share.sessions sessions
(SHARE_SESSION_LIMIT_REACHED past that).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

# A share session's partitions: topic id and partition index.
SessionPartition = tuple[uuid.UUID, int]


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    # The epoch the member's next request must carry.
    epoch: int = 1
    partitions: dict[SessionPartition, None] = field(default_factory=dict)
    # Where the member's connection comes from; a closed connection ends the session.
    connection: str = ""

    def next_epoch(self) -> None:
        # As Kafka's, the epoch wraps to 1 after Integer.MAX_VALUE, never to 0 or -1.
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class ShareSessionError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def open(self, group_id: str, member_id: str, connection: str) -> ShareSession:
        """A new session for the member (epoch 0). One it already had is replaced: the
        caller releases what the old one held."""
        key = (group_id, member_id)
        if key not in self._sessions and len(self._sessions) >= self.max_sessions:
            raise ShareSessionError(
                ErrorCode.share_session_limit_reached,
                f"The share session cache is full ({self.max_sessions} sessions,"
                " group.share.max.share.sessions)",
            )
        session = ShareSession(group_id, member_id, connection=connection)
        self._sessions[key] = session
        return session

    def resume(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session at `epoch` (the one its last request left it expecting)."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(
                ErrorCode.share_session_not_found,
                f"Share session for member {member_id} of group {group_id} not found",
            )
        if epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                f"Share session epoch {epoch} of member {member_id} is not the expected"
                f" {session.epoch}",
            )
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_connection(self, connection: str) -> list[ShareSession]:
        return [s for s in self._sessions.values() if s.connection == connection]
