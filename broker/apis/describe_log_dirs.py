"""DescribeLogDirs (key 35), v1-v4: each log dir, its partitions and their sizes.

Every configured log dir is listed; an offline one answers KAFKA_STORAGE_ERROR and no
partitions. A partition being moved (AlterReplicaLogDirs) appears twice: its current
log, and the future log in the target dir with `is_future_key` and, as offset lag, how
far the copy is behind the current log end. The volume's total and usable bytes (v4)
are the filesystem's, as Java's File.getTotalSpace/getUsableSpace report them.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.describe_log_dirs")

PartitionFilter = dict[str, set[int]] | None


class DescribableLogDirTopicView(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class DescribeLogDirsRequestView(Protocol):
    """What the handler reads of a DescribeLogDirsRequest (every served version has it):
    the partitions asked for, null for every one."""

    @property
    def topics(self) -> Sequence[DescribableLogDirTopicView] | None: ...


if TYPE_CHECKING:
    from kio.schema.describe_log_dirs import v1, v2, v3, v4

    def _served_requests_are_views(
        r1: v1.DescribeLogDirsRequest,
        r2: v2.DescribeLogDirsRequest,
        r3: v3.DescribeLogDirsRequest,
        r4: v4.DescribeLogDirsRequest,
    ) -> list[DescribeLogDirsRequestView]:
        return [r1, r2, r3, r4]


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        # Kafka answers no log dir (and from v3 the error) to whom may not describe.
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    wanted: PartitionFilter = None
    if request.topics is not None:
        wanted = defaultdict(set)
        for asked in request.topics:
            wanted[asked.topic].update(asked.partitions)
    manager = ctx.services.log_manager
    # (log dir -> topic -> [(partition, size, offset lag, is future)])
    found: dict[Path, dict[str, list[tuple[int, int, int, bool]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for (topic, index), current in manager.logs.items():
        if _wanted(wanted, topic, index) and not current.is_offline:
            lag = max(current.high_watermark - current.log_end_offset, 0)
            found[current.dir.parent][topic].append((index, current.size_in_bytes, lag, False))
    for (topic, index), future in manager.future_logs.items():
        replaced = manager.get_log(topic, index)
        if _wanted(wanted, topic, index) and replaced is not None and not future.is_offline:
            lag = max(replaced.log_end_offset - future.log_end_offset, 0)
            found[future.dir.parent][topic].append((index, future.size_in_bytes, lag, True))
    results = []
    for log_dir in manager.log_dirs:
        if manager.is_offline(log_dir):
            results.append(
                build(
                    types.DescribeLogDirsResult,
                    error_code=ErrorCode.kafka_storage_error,
                    log_dir=str(log_dir),
                    topics=(),
                )
            )
            continue
        total, usable = _volume_bytes(log_dir)
        topics = tuple(
            build(
                types.DescribeLogDirsTopic,
                name=topic,
                partitions=tuple(
                    build(
                        types.DescribeLogDirsPartition,
                        partition_index=index,
                        partition_size=size,
                        offset_lag=lag,
                        is_future_key=is_future,
                    )
                    for index, size, lag, is_future in sorted(entries)
                ),
            )
            for topic, entries in sorted(found[log_dir].items())
        )
        results.append(
            build(
                types.DescribeLogDirsResult,
                error_code=ErrorCode.none,
                log_dir=str(log_dir),
                topics=topics,
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=tuple(results),
    )


def _wanted(wanted: PartitionFilter, topic: str, index: int) -> bool:
    return wanted is None or index in wanted.get(topic, ())


def _volume_bytes(log_dir: Path) -> tuple[int, int]:
    try:
        stats = os.statvfs(log_dir)
    except OSError as exc:
        log.warning("Cannot read the size of the volume of %s: %s", log_dir, exc)
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
