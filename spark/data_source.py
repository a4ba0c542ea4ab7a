"""The `kafka-segments` Spark data source: segment files in Kafka's format as a DataFrame.

    spark.read.format("kafka-segments").option("topics", "orders").load("/var/lib/kafka")

The path is a log dir, one partition directory, or a glob of either. Planning lists the
directories (brook.storage.reader's listing: no file is opened) and gives every segment a
Spark input partition of its own; each task reads its segment with segment_rows.

Not yet: filters are not pushed down (Spark filters the rows after reading every segment
of the selected partitions) and a large segment is read by one task.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from brook.storage import log_file_utils as files
from brook.storage.reader import PartitionFiles, list_partitions, partition_files

from . import schema
from .segment_rows import read_segment

NAME = "kafka-segments"


class SegmentSplit(InputPartition):  # type: ignore[misc]
    """One segment to read: what a task needs, taken from the listing on the driver."""

    def __init__(self, topic: str, partition: int, log_path: str, size: int) -> None:
        super().__init__(log_path)
        self.topic = topic
        self.partition = partition
        self.log_path = log_path
        self.size = size


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


class KafkaSegmentsDataSource(DataSource):  # type: ignore[misc]
    """Options: `topics` and `partitions` (comma-separated), `mode` (records or batches)."""

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

    def schema(self) -> StructType:
        return spark_schema(self._mode())

    def reader(self, schema: StructType) -> DataSourceReader:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{NAME}: load(PATH) needs a log dir, partition directory or glob")
        return KafkaSegmentsReader(
            path,
            self._mode(),
            _comma_list(self.options.get("topics")),
            _partition_numbers(self.options.get("partitions")),
        )


def spark_schema(mode: str) -> StructType:
    # Timestamps stay Spark's TimestampType (with a time zone), as Spark's Kafka source gives.
    return from_arrow_schema(schema.MODES[mode], prefer_timestamp_ntz=False)


class KafkaSegmentsReader(DataSourceReader):  # type: ignore[misc]
    def __init__(
        self, path: str, mode: str, topics: list[str] | None, partitions: set[int] | None
    ) -> None:
        self.path = path
        self.mode = mode
        self.topics = None if topics is None else set(topics)
        self.partition_numbers = partitions

    def partitions(self) -> list[InputPartition]:
        """One split per segment of every selected partition, in topic, partition and
        offset order."""
        splits: list[InputPartition] = []
        for partition in find_partitions(self.path):
            if self.topics is not None and partition.topic not in self.topics:
                continue
            if (
                self.partition_numbers is not None
                and partition.partition not in self.partition_numbers
            ):
                continue
            for segment in partition.segments:
                splits.append(
                    SegmentSplit(
                        partition.topic, partition.partition, str(segment.log_path), segment.size
                    )
                )
        return splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentSplit):
            return iter(())  # Spark's placeholder when nothing was selected
        return read_segment(partition.log_path, partition.topic, partition.partition, self.mode)
