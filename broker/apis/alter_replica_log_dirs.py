"""AlterReplicaLogDirs (key 34), v1-v2: move partitions to another of the broker's log dirs.

Answered at once, as Kafka does: the copy runs in the background (broker/replica/log_dir_mover.py)
and DescribeLogDirs shows its progress. Per partition: LOG_DIR_NOT_FOUND for a path
that is not one of log.dirs, KAFKA_STORAGE_ERROR when the target dir or the partition
is offline, REPLICA_NOT_AVAILABLE for a partition this broker does not host (Kafka keeps
that code here for compatibility), and none when the move started or there was
nothing to move.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.alter_replica_log_dirs")


class AlterReplicaLogDirTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class AlterReplicaLogDirView(Protocol):
    """A log dir and the replicas to move to it."""

    @property
    def path(self) -> str: ...
    @property
    def topics(self) -> Sequence[AlterReplicaLogDirTopicView]: ...


class AlterReplicaLogDirsRequestView(Protocol):
    """What the handler reads of an AlterReplicaLogDirsRequest (every served version has
    it)."""

    @property
    def dirs(self) -> Sequence[AlterReplicaLogDirView]: ...


if TYPE_CHECKING:
    from kio.schema.alter_replica_log_dirs import v1, v2

    def _served_requests_are_views(
        r1: v1.AlterReplicaLogDirsRequest, r2: v2.AlterReplicaLogDirsRequest
    ) -> list[AlterReplicaLogDirsRequestView]:
        return [r1, r2]


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS)
def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    results: dict[str, list[Any]] = {}
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    for target in request.dirs:
        for topic in target.topics:
            partitions = results.setdefault(topic.name, [])
            for index in topic.partitions:
                error = (
                    _move(ctx, target.path, topic.name, index)
                    if allowed
                    else ErrorCode.cluster_authorization_failed
                )
                partitions.append(
                    build(
                        types.AlterReplicaLogDirPartitionResult,
                        partition_index=index,
                        error_code=error,
                    )
                )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(
                types.AlterReplicaLogDirTopicResult,
                topic_name=name,
                partitions=tuple(partitions),
            )
            for name, partitions in results.items()
        ),
    )


def _move(ctx: RequestContext, path: str, topic: str, index: int) -> ErrorCode:
    services = ctx.services
    manager = services.log_manager
    log_dir = manager.log_dir_by_path(path)
    if log_dir is None:
        log.warning(
            "AlterReplicaLogDirs from %s: %s-%d cannot move to %r, which is not one of log.dirs",
            ctx.who,
            topic,
            index,
            path,
        )
        return ErrorCode.log_dir_not_found
    if manager.is_offline(log_dir):
        log.warning("AlterReplicaLogDirs from %s: log dir %s is offline", ctx.who, log_dir)
        return ErrorCode.kafka_storage_error
    partition = services.replicas.hosted(topic, index)
    if partition is None:
        return ErrorCode.replica_not_available
    if partition.is_offline:
        return ErrorCode.kafka_storage_error
    try:
        services.log_dir_mover.move(partition, log_dir)
    except KafkaError as exc:
        log.warning("AlterReplicaLogDirs from %s: %s-%d: %s", ctx.who, topic, index, exc.message)
        return exc.error_code
    return ErrorCode.none
