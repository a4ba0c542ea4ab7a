"""OffsetCommit (key 8), v2-v9: store a group's consumed positions in __consumer_offsets.

Members of a managed group commit with their generation and member id; a client that
manages its own partitions commits with generation -1 into an empty group. Each
partition fails on its own for an unknown topic or metadata over
offset.metadata.max.bytes; a group-level error applies to every partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, denied
from ..authorizer.operations import AclOperation
from ..groups.coordinator import Answer
from ..server.request_context import RequestContext
from ..server.services import BrokerServices
from . import NO_THROTTLE, build, handles, respond, schema_module
from .views import CommitRequestView, CommitTopicView

log = logging.getLogger("brook.apis.offset_commit")

OffsetKey = tuple[str, int]


class OffsetCommitRequestView(CommitRequestView, Protocol):
    """What the handler reads of an OffsetCommitRequest in every served version, with
    its topics and partitions (views.py); the retention time (v2-v4) and the group
    instance id (v7+) are read where the version has them."""

    @property
    def generation_id_or_member_epoch(self) -> int: ...
    @property
    def member_id(self) -> str: ...


if TYPE_CHECKING:
    from kio.schema.offset_commit import v2, v3, v4, v5, v6, v7, v8, v9

    def _served_requests_are_views(
        r2: v2.OffsetCommitRequest,
        r3: v3.OffsetCommitRequest,
        r4: v4.OffsetCommitRequest,
        r5: v5.OffsetCommitRequest,
        r6: v6.OffsetCommitRequest,
        r7: v7.OffsetCommitRequest,
        r8: v8.OffsetCommitRequest,
        r9: v9.OffsetCommitRequest,
    ) -> list[OffsetCommitRequestView]:
        return [r2, r3, r4, r5, r6, r7, r8, r9]


@handles(ApiKey.OFFSET_COMMIT)
def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequestView) -> Any:
    services = ctx.services
    retention = getattr(request, "retention_time", None)  # v2-v4; -1 is the broker's
    retention_ms = int(retention.total_seconds() * 1000) if retention is not None else -1
    refusal, unreadable = commit_denials(ctx, request)
    if refusal is not None:
        return _response(ctx, request, refusal)
    accepted, errors, known_partitions = offsets_to_commit(
        services, request.topics, retention_ms, unreadable
    )
    if ctx.faults is not None:
        for key in list(accepted):
            if (injected := ctx.injected_error(*key)) is not None:
                errors[key] = injected
                del accepted[key]
                known_partitions.remove(key)
    # Kafka drops unknown topics before the coordinator sees the request: with none
    # left, the group is neither checked nor created.
    if not known_partitions:
        return _response(ctx, request, errors)
    answer = services.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        getattr(request, "group_instance_id", None),
        accepted,
        ctx.api_version,
    )

    return commit_response(ctx, request, answer, errors, known_partitions)


def commit_response(
    ctx: RequestContext,
    request: CommitRequestView,
    answer: Answer[ErrorCode],
    errors: dict[OffsetKey, ErrorCode],
    known_partitions: list[OffsetKey],
) -> Any:
    """The response of an OffsetCommit or TxnOffsetCommit once the group answered: a
    group error (stale generation, unknown member, ...) is every known partition's."""

    def with_group_error(group_error: ErrorCode) -> Any:
        if group_error:
            log.info(
                "%s of group %s from %s (client %r) refused: %s",
                ApiKey(ctx.api_key).name,
                request.group_id,
                ctx.peer,
                ctx.client_id,
                group_error.name.upper(),
            )
            # The group's answer comes before any partition's own.
            errors.update({key: group_error for key in known_partitions})
        return _response(ctx, request, errors)

    return respond(answer, with_group_error)


def commit_denials(
    ctx: RequestContext, request: CommitRequestView
) -> tuple[dict[OffsetKey, ErrorCode] | None, frozenset[str]]:
    """Kafka's checks of a commit (OffsetCommit, TxnOffsetCommit): Write on the
    transactional id, then Read on the group, each refusing every partition; then Read on
    each topic. (Every partition's error when refused, else the unreadable topics.)"""
    if ctx.services.authorizer is None:
        return None, frozenset()
    everything = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(everything, ErrorCode.transactional_id_authorization_failed), (
            frozenset()
        )
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return dict.fromkeys(everything, ErrorCode.group_authorization_failed), frozenset()
    names = (topic for topic, _ in everything)
    return None, denied(ctx, AclOperation.READ, ResourceType.TOPIC, names)


def offsets_to_commit(
    services: BrokerServices,
    topics: Iterable[CommitTopicView],
    retention_ms: int = -1,
    unreadable: frozenset[str] = frozenset(),
) -> tuple[dict[OffsetKey, CommittedOffset], dict[OffsetKey, ErrorCode], list[OffsetKey]]:
    """The offsets a commit (OffsetCommit, TxnOffsetCommit) may store, the errors of the
    partitions it may not (a topic the principal may not read, an unknown topic, metadata
    over offset.metadata.max.bytes), and every partition of a known topic."""
    now = services.clock()
    max_metadata = services.config["offset.metadata.max.bytes"]
    errors: dict[OffsetKey, ErrorCode] = {}
    accepted: dict[OffsetKey, CommittedOffset] = {}
    known_partitions = []
    for topic in topics:
        known = services.metadata.get(topic.name)
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            metadata = partition.committed_metadata or ""
            if topic.name in unreadable:
                errors[key] = ErrorCode.topic_authorization_failed
                continue
            if known is None or not 0 <= partition.partition_index < len(known.partitions):
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            known_partitions.append(key)
            if _java_length(metadata) > max_metadata:
                errors[key] = ErrorCode.offset_metadata_too_large
            else:
                accepted[key] = CommittedOffset(
                    offset=partition.committed_offset,
                    leader_epoch=getattr(partition, "committed_leader_epoch", -1),
                    metadata=metadata,
                    commit_timestamp=now,
                    expire_timestamp=now + retention_ms if retention_ms > 0 else -1,
                )
    return accepted, errors, known_partitions


def _response(
    ctx: RequestContext, request: CommitRequestView, errors: dict[OffsetKey, ErrorCode]
) -> Any:
    """Every requested partition with its error (OffsetCommit's and TxnOffsetCommit's
    responses have the same shape under their own names)."""
    types = schema_module(ctx.response_type)
    prefix = "OffsetCommit" if ctx.api_key == ApiKey.OFFSET_COMMIT else "TxnOffsetCommit"
    topics = tuple(
        build(
            getattr(types, f"{prefix}ResponseTopic"),
            name=topic.name,
            partitions=tuple(
                build(
                    getattr(types, f"{prefix}ResponsePartition"),
                    partition_index=p.partition_index,
                    error_code=errors.get((topic.name, p.partition_index), ErrorCode.none),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=topics)


def _java_length(text: str) -> int:
    """Kafka bounds metadata by Java's String.length(): UTF-16 code units, not bytes."""
    return len(text.encode("utf-16-le")) // 2
