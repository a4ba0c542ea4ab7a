"""Views shared by several APIs: read-only Protocols of what their handlers read of a
request, typed as the handlers use it. kio has one class per message version; each
satisfies the views structurally (its newtypes, TopicName or i32, are str and int), and
each API module proves it for the versions it serves in a `TYPE_CHECKING` block that
mypy checks. A view of one API stays in that API's module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class CommitPartitionView(Protocol):
    """A partition of an OffsetCommit or TxnOffsetCommit request (Kafka's
    OffsetCommitRequestPartition, TxnOffsetCommitRequestPartition). The committed leader
    epoch (OffsetCommit v6+, TxnOffsetCommit v2+) is read where the version has it."""

    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class CommitTopicView(Protocol):
    """A topic of an OffsetCommit or TxnOffsetCommit request (Kafka's
    OffsetCommitRequestTopic, TxnOffsetCommitRequestTopic)."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[CommitPartitionView]: ...


class CommitRequestView(Protocol):
    """What OffsetCommit and TxnOffsetCommit requests share, read by the helpers both use
    (offset_commit.py); TxnOffsetCommit's transactional id is read where it is present."""

    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[CommitTopicView]: ...
