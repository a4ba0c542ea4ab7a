"""The `kafka-segments` Spark data source: segment files in Kafka's format as a DataFrame.

    spark.read.format("kafka-segments").option("topics", "orders").load("/var/lib/kafka")

The path is a log dir, one partition directory, or a glob of either. Planning lists the
directories (brook.storage.reader's listing) and gives every segment a Spark input
partition of its own, or several for a segment larger than the `maxPartitionBytes` option
(planning.py: cut at offset-index entries); each task reads its byte range with
segment_rows.

Filters on topic, partition, offset and timestamp are pushed down (filters.py): they
select partitions, segments and byte ranges at planning and rows in the tasks. Spark
calls pushFilters only when spark.sql.python.filterPushdown.enabled is true (Spark 4.1+),
and refuses a reader that implements it otherwise: register() turns the setting on, and
registers a reader without pushdown where the session does not allow it.

`isolation.level` is Kafka's consumer setting: read_committed reads below each
partition's last stable offset and leaves out the batches of aborted and open
transactions; in both levels `transaction_outcome` says what became of a record's
transaction (transactions.py, gathered per partition at planning).

Not supported: message formats v0/v1 (a damaged row each), and column pruning (Spark's
Python data sources have none: every column is built, Spark drops those not selected).
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from brook.storage import log_file_utils as files
from brook.storage.reader import PartitionFiles, list_partitions, partition_files

from . import schema
from .filters import PushedFilters
from .planning import DEFAULT_MAX_BYTES, SegmentRange, plan_partition
from .segment_rows import BatchBounds, read_segment
from .transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    PartitionTransactions,
    partition_transactions,
)

NAME = "kafka-segments"


class SegmentSplit(InputPartition):
    """One byte range of one segment to read: what a task needs, planned on the driver
    (the bounds of its batches, and its share of the partition's transactions)."""

    def __init__(
        self, planned: SegmentRange, bounds: BatchBounds, transactions: PartitionTransactions
    ) -> None:
        super().__init__(str(planned.log_path))
        self.topic = planned.topic
        self.partition = planned.partition
        self.log_path = str(planned.log_path)
        self.start_position = planned.start_position
        self.end_position = planned.end_position
        self.bounds = bounds
        self.transactions = transactions


def _comma_list(text: str | None) -> list[str] | None:
    if text is None or not text.strip():
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def _partition_numbers(text: str | None) -> set[int] | None:
    items = _comma_list(text)
    if items is None:
        return None
    try:
        return {int(item) for item in items}
    except ValueError:
        raise ValueError(
            f"{NAME}: option partitions={text!r} must be partition numbers separated by commas"
        ) from None


_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20}
_BYTE_UNITS |= {"g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def _byte_size(name: str, text: str | None, default: int) -> int:
    """A size in bytes as Spark writes them: 1048576, 512k, 64m, 1g."""
    if text is None or not text.strip():
        return default
    value = text.strip().lower()
    digits = value.rstrip("bkmgt")
    unit = value[len(digits) :]
    if digits.isdigit() and unit in _BYTE_UNITS and int(digits) > 0:
        return int(digits) * _BYTE_UNITS[unit]
    raise ValueError(
        f"{NAME}: option {name}={text!r} must be a positive size in bytes (e.g. 134217728,"
        " 128m, 1g)"
    )


def _is_partition_dir(path: Path) -> bool:
    """A directory named `<topic>-<n>` holding no partition directories of its own (a log
    dir may be named like a partition: `kafka-logs-1`)."""
    try:
        files.parse_topic_partition(path.name)
    except ValueError:
        return False
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir():
                try:
                    files.parse_topic_partition(entry.name)
                    return False
                except ValueError:
                    continue
    return True


def find_partitions(path: str) -> list[PartitionFiles]:
    """The partitions under a log dir, a partition directory, or a glob of either."""
    matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    found: dict[Path, PartitionFiles] = {}
    for match in matches:
        directory = Path(match)
        if not directory.is_dir():
            if glob.has_magic(path):
                continue  # a glob may also match files beside the directories
            raise FileNotFoundError(f"{NAME}: {path} is not a directory")
        listed = [partition_files(directory)] if _is_partition_dir(directory) else None
        for partition in listed or list_partitions(directory):
            found.setdefault(partition.path.resolve(), partition)
    if not matches:
        raise FileNotFoundError(f"{NAME}: no directory matches {path}")
    return sorted(found.values(), key=lambda p: (p.topic, p.partition, str(p.path)))


class KafkaSegmentsDataSource(DataSource):
    """Options: `topics` and `partitions` (comma-separated), `mode` (records or batches),
    `maxPartitionBytes` (the largest byte range of a segment one task reads, 128m by
    default), `isolation.level` (Kafka's consumer setting: read_uncommitted, the
    default, or read_committed)."""

    pushdown = True  # False in the class register() uses where pushdown is off

    @classmethod
    def name(cls) -> str:
        return NAME

    def _mode(self) -> str:
        mode = self.options.get("mode", "records").strip().lower()
        if mode not in schema.MODES:
            raise ValueError(
                f"{NAME}: option mode={mode!r} is not one of {', '.join(schema.MODES)}"
            )
        return mode

    def _read_committed(self) -> bool:
        level = self.options.get("isolation.level", READ_UNCOMMITTED).strip().lower()
        if level not in ISOLATION_LEVELS:
            raise ValueError(
                f"{NAME}: option isolation.level={level!r} is not one of"
                f" {', '.join(ISOLATION_LEVELS)}"
            )
        return level == READ_COMMITTED

    def schema(self) -> StructType:
        return spark_schema(self._mode())

    def reader(self, schema: StructType) -> DataSourceReader:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{NAME}: load(PATH) needs a log dir, partition directory or glob")
        reader_class = KafkaSegmentsReader if self.pushdown else KafkaSegmentsReaderNoPushdown
        return reader_class(
            path,
            self._mode(),
            _comma_list(self.options.get("topics")),
            _partition_numbers(self.options.get("partitions")),
            _byte_size(
                "maxPartitionBytes", self.options.get("maxPartitionBytes"), DEFAULT_MAX_BYTES
            ),
            self._read_committed(),
        )


class KafkaSegmentsDataSourceNoPushdown(KafkaSegmentsDataSource):
    """The same source for a session where spark.sql.python.filterPushdown.enabled is
    off: Spark fails a read through a reader that implements pushFilters there."""

    pushdown = False


def spark_schema(mode: str) -> StructType:
    # Timestamps stay Spark's TimestampType (with a time zone), as Spark's Kafka source gives.
    return from_arrow_schema(schema.MODES[mode], prefer_timestamp_ntz=False)


class KafkaSegmentsReader(DataSourceReader):
    def __init__(
        self,
        path: str,
        mode: str,
        topics: list[str] | None,
        partitions: set[int] | None,
        max_partition_bytes: int = DEFAULT_MAX_BYTES,
        read_committed: bool = False,
    ) -> None:
        self.path = path
        self.mode = mode
        self.topics = None if topics is None else set(topics)
        self.partition_numbers = partitions
        self.max_partition_bytes = max_partition_bytes
        self.read_committed = read_committed
        self.pushed = PushedFilters(mode)

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Take the filters this source applies exactly; the rest go back to Spark."""
        self.pushed = PushedFilters(self.mode)
        return list(self.pushed.push(filters))

    def partitions(self) -> list[InputPartition]:
        """The byte ranges to read of every selected partition's segments, in topic,
        partition and offset order."""
        splits: list[InputPartition] = []
        for partition in find_partitions(self.path):
            if self.topics is not None and partition.topic not in self.topics:
                continue
            if (
                self.partition_numbers is not None
                and partition.partition not in self.partition_numbers
            ):
                continue
            if not self.pushed.selects(partition.topic, partition.partition):
                continue
            transactions = partition_transactions(partition)
            bounds = self.pushed.bounds
            stable = transactions.last_stable_offset
            if self.read_committed and stable is not None:
                # Kafka's read_committed fetch ends at the last stable offset.
                last = (
                    stable - 1
                    if bounds.last_offset is None
                    else min(bounds.last_offset, stable - 1)
                )
                bounds = dataclasses.replace(bounds, last_offset=last)
            next_bases = {
                segment.log_path: (segment.base_offset, following.base_offset)
                for segment, following in zip(
                    partition.segments, partition.segments[1:], strict=False
                )
            }
            for planned in plan_partition(partition, bounds, self.max_partition_bytes):
                base, next_base = next_bases.get(planned.log_path, (0, None))
                share = transactions.within(base, next_base)
                splits.append(SegmentSplit(planned, bounds, share))
        return splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentSplit):
            return  # Spark's placeholder when nothing was selected
        batches = read_segment(
            partition.log_path,
            partition.topic,
            partition.partition,
            self.mode,
            partition.start_position,
            partition.end_position,
            partition.bounds,
            partition.transactions,
            self.read_committed,
        )
        for batch in batches:
            kept = self.pushed.apply(batch)
            if kept.num_rows:
                yield kept


class KafkaSegmentsReaderNoPushdown(KafkaSegmentsReader):
    # Spark checks whether the reader's class overrides pushFilters.
    pushFilters = DataSourceReader.pushFilters
