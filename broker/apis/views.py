"""Views shared by several APIs: read-only Protocols of what their handlers read of a
request, typed as the handlers use it. kio has one class per message version; each
satisfies the views structurally (its newtypes, TopicName or i32, are str and int), and
each API module proves it for the versions it serves in a `TYPE_CHECKING` block that
mypy checks. A view of one API stays in that API's module.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol, TypeVar


class TransactionalRequestView(Protocol):
    """What a transactional producer's requests name it by (EndTxn, AddOffsetsToTxn,
    TxnOffsetCommit, and AddPartitionsToTxn's transactions from v4): its transactional id,
    and its producer id and epoch."""

    @property
    def transactional_id(self) -> str: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...


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


class AclFilterView(Protocol):
    """An ACL filter: a DescribeAclsRequest itself, and each filter of a DeleteAclsRequest
    (Kafka's DeleteAclsFilter), with the same fields (acl_requests.filter_from)."""

    @property
    def resource_type_filter(self) -> int: ...
    @property
    def resource_name_filter(self) -> str | None: ...
    @property
    def pattern_type_filter(self) -> int: ...
    @property
    def principal_filter(self) -> str | None: ...
    @property
    def host_filter(self) -> str | None: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


class AlterConfigsResourceView(Protocol):
    """A resource of an AlterConfigs or IncrementalAlterConfigs request (Kafka's
    AlterConfigsResource in both), whose configs each API reads its own way."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


ResourceT_co = TypeVar("ResourceT_co", bound=AlterConfigsResourceView, covariant=True)


class ConfigsAlterationView(Protocol[ResourceT_co]):
    """An AlterConfigs or IncrementalAlterConfigs request, as both handlers read it
    (incremental_alter_configs.alter_all), of resources of either API's kind."""

    @property
    def resources(self) -> Sequence[ResourceT_co]: ...
    @property
    def validate_only(self) -> bool: ...


# --- the share-state APIs (83-87): a group, then partitions of topics by id -----------


class StatePartitionView(Protocol):
    """A partition of a share-state request; each API reads its own fields of it (the
    leader epoch, the state to write) where its handler serves the partition."""

    @property
    def partition(self) -> int: ...


class StateTopicView(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[StatePartitionView]: ...


class StateRequestView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[StateTopicView]: ...


# --- ShareFetch and ShareAcknowledge: acknowledgements of partitions by topic id -------


class AcknowledgementBatchView(Protocol):
    """Offsets a share-group member acknowledges, one type for all or one each."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


class SharePartitionView(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def acknowledgement_batches(self) -> Sequence[AcknowledgementBatchView]: ...


class ShareTopicView(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[SharePartitionView]: ...
