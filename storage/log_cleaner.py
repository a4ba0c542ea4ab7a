"""Log compaction of one partition: Kafka's LogCleaner (its Cleaner and LogCleanerManager).

A compacted log keeps, for every key, at least its latest record. One cleaning:

1. Choose what to clean (on the owner of the log, quickly: `plan_cleaning`). The dirty
   section runs from the cleaner checkpoint (or the log start) to the first uncleanable
   offset: never the active segment, never past the last stable offset (which is at most
   the high watermark), never a segment whose newest record is younger than
   min.compaction.lag.ms. Only whole segments are cleaned. The log is chosen when its
   dirty bytes are at least min.cleanable.dirty.ratio of the cleanable bytes, or when
   its oldest dirty record is older than max.compaction.lag.ms.
2. Clean (anywhere, e.g. a thread: `clean`). Build the offset map, key -> the offset of
   its latest record, over the dirty section (aborted transactional data and control
   batches do not count). The map has a memory budget (log.cleaner.dedupe.buffer.size
   split between the cleaner threads): when it is full, the cleaning ends after the
   last batch mapped whole, possibly inside a segment, and the next cleaning goes on
   from there, as Kafka's does. Then rewrite every segment below the end of the map, in
   groups that fit one segment, into `.cleaned` segments with fresh indexes: a record
   is kept when it is its key's latest (or past the map); a tombstone is kept until the
   delete horizon of its batch has passed; keyless records are dropped. Each batch
   keeps its base offset, last offset, producer fields and attributes, as Kafka's
   MemoryRecords.filterTo does, so every record keeps its offset and every producer its
   sequence numbers. The last batch of each live producer is kept, emptied of records
   if need be, so that idempotence survives; aborted transactions' data is removed and
   their markers once nothing needs them.
3. Swap (on the owner of the log, quickly: `Log.replace_segments`): `.cleaned` ->
   `.swap`, the old segments renamed `.deleted`, `.swap` -> the segment's name. A crash
   at any point leaves either the old segments (`.cleaned` files are deleted at start)
   or the new one (a `.swap` replaces what it overlaps at start: storage/log_loader.py).

Tombstones and markers of empty transactions follow KIP-534, as Kafka 3.1+ does for
batches of magic v2: the first cleaning that keeps one sets its batch's delete horizon
(now + delete.retention.ms, stored as the batch's base timestamp with the
delete-horizon attribute bit); a later cleaning after that time drops it.

The cleaner checkpoint, `cleaner-offset-checkpoint` in each log dir, holds the offset
up to which each log has been cleaned, in Kafka's offset checkpoint format.

Synchronous, no asyncio, no broker imports.
"""

from __future__ import annotations

import bisect
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from brook.protocol.compression import compress

# The native-varint decoder: per-record work is the cleaner's cost.
from brook.protocol.record_batch import (
    CRC_OFFSET,
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    compute_crc,
    decode_records,
    encode_record,
    scan_record_keys,
)

from . import log_file_utils as files
from .checkpoints import OffsetCheckpointFile
from .end_transaction_marker import read_end_txn_marker
from .file_records import RECOVERY_CHUNK, FileRecords
from .log_config import LogConfig
from .log_segment import LogSegment
from .offset_map import DEFAULT_LOAD_FACTOR, OffsetMap
from .throttler import Throttler
from .transaction_index import AbortedTxn

logger = logging.getLogger("brook.storage.log_cleaner")

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Kafka's default log.cleaner.dedupe.buffer.size: 128 MiB for all cleaner threads.
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
INT32_MAX = 2**31 - 1

TopicPartition = tuple[str, int]


# --- the cleaner checkpoint ---------------------------------------------------------------


class CleanerCheckpoints:
    """`cleaner-offset-checkpoint` of one log dir: where each log's dirty section starts."""

    def __init__(self, log_dir: Path) -> None:
        self._file = OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT_FILE)
        try:
            self.offsets: dict[TopicPartition, int] = self._file.read()
        except FileNotFoundError:
            self.offsets = {}
        except Exception as exc:  # a damaged checkpoint only costs a full cleaning
            logger.warning("Ignoring unreadable cleaner checkpoint %s: %s", self._file.path, exc)
            self.offsets = {}

    def get(self, topic: str, partition: int) -> int | None:
        return self.offsets.get((topic, partition))

    def update(self, topic: str, partition: int, offset: int) -> None:
        self.offsets[(topic, partition)] = offset
        self._file.write(self.offsets)

    def retain(self, live: Iterable[TopicPartition]) -> None:
        """Forget logs that are gone (deleted or moved)."""
        keep = set(live)
        if any(tp not in keep for tp in self.offsets):
            self.offsets = {tp: o for tp, o in self.offsets.items() if tp in keep}
            self._file.write(self.offsets)


# --- choosing what to clean ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A live producer's last batch (Kafka's LastRecord): the last offset of its last
    data batch (None when its last batch is a marker) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class CleanPlan:
    """One cleaning of one log, taken from the log on its owner's thread.

    `segments`: every segment below `end_offset` (the log's first `len(segments)`
    segments), with their sizes then; `first_dirty_offset`..`end_offset` is what the
    offset map covers."""

    name: str
    directory: Path
    config: LogConfig
    segments: list[LogSegment]
    sizes: list[int]
    first_dirty_offset: int
    end_offset: int
    active_producers: dict[int, LastRecord]
    aborted_txns: list[AbortedTxn]
    now_ms: int
    dirty_ratio: float
    overdue: bool = False


def cleanable_range(
    segments: list[LogSegment],
    *,
    log_start_offset: int,
    last_stable_offset: int,
    checkpoint: int | None,
    config: LogConfig,
    now_ms: int,
) -> tuple[int, int]:
    """(first dirty offset, end of the cleanable whole segments) of a log (Kafka's
    LogCleanerManager.cleanableOffsets, rounded down to a segment boundary)."""
    first_dirty = log_start_offset
    active = segments[-1]
    if checkpoint is not None and log_start_offset <= checkpoint <= active.next_offset:
        first_dirty = checkpoint
    first_uncleanable = min(last_stable_offset, active.base_offset)
    if config.min_compaction_lag_ms > 0:
        for segment in segments[:-1]:
            following = segments[segments.index(segment) + 1].base_offset
            if following <= first_dirty:
                continue
            if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    end = segments[0].base_offset
    for i in range(len(segments) - 1):
        upper = segments[i + 1].base_offset
        if upper > first_uncleanable:
            break
        end = upper
    return first_dirty, end


def plan_cleaning(
    log: _CleanableLog,
    checkpoint: int | None,
    now_ms: int,
    *,
    force: bool = False,
    with_state: bool = True,
) -> CleanPlan | None:
    """What to clean of `log` now, or None when it need not or cannot be cleaned.

    Run where the log is owned (it reads the log's offsets and producer state).
    `with_state=False` leaves out the producers and aborted transactions: enough to
    compare logs, not to clean one."""
    config = log.config
    segments = log.segments
    if not config.compact or len(segments) < 2:
        return None
    first_dirty, end = cleanable_range(
        segments,
        log_start_offset=log.log_start_offset,
        last_stable_offset=log.last_stable_offset,
        checkpoint=checkpoint,
        config=config,
        now_ms=now_ms,
    )
    if end <= first_dirty:
        return None
    below = [segment for segment in segments[:-1] if _upper(segments, segment) <= end]
    clean_bytes = sum(s.size for s in below if _upper(segments, s) <= first_dirty)
    dirty = [s for s in below if _upper(segments, s) > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    total = clean_bytes + dirty_bytes
    ratio = dirty_bytes / total if total else 0.0
    overdue = False
    if config.max_compaction_lag_ms < 2**63 - 1 and dirty:
        first_timestamp = _first_batch_timestamp(dirty[0])
        overdue = first_timestamp >= 0 and now_ms - first_timestamp > config.max_compaction_lag_ms
    if not force and ratio < config.min_cleanable_dirty_ratio and not overdue:
        return None
    producers: dict[int, LastRecord] = {}
    aborted: list[AbortedTxn] = []
    if with_state:
        producers = {
            entry.producer_id: LastRecord(
                entry.last_data_offset if entry.last_data_offset >= 0 else None,
                entry.producer_epoch,
            )
            for entry in log.active_producers()
        }
        for segment in segments:
            aborted += segment.txn_index.all_aborted_txns()
    return CleanPlan(
        log.name,
        log.dir,
        config,
        below,
        [s.size for s in below],
        first_dirty,
        end,
        producers,
        aborted,
        now_ms,
        ratio,
        overdue,
    )


def _upper(segments: list[LogSegment], segment: LogSegment) -> int:
    i = segments.index(segment)
    return segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset


def _first_batch_timestamp(segment: LogSegment) -> int:
    for _, header, _ in segment.log.batches(0):
        return header.max_timestamp
    return -1


# --- cleaning -------------------------------------------------------------------------------


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    map_bytes_read: int = 0
    buffer_utilization: float = 0.0
    elapsed_s: float = 0.0


@dataclass(slots=True)
class CleanResult:
    """The cleaned segments (named `.cleaned`, closed) and the old ones each replaces.

    `end_offset`: the first offset not cleaned, where the cleaner checkpoint moves once
    the segments are swapped in: the plan's end, or less when the offset map filled up."""

    plan: CleanPlan
    end_offset: int
    groups: list[tuple[LogSegment, list[LogSegment]]] = field(default_factory=list)
    stats: CleanerStats = field(default_factory=CleanerStats)

    def discard(self) -> None:
        """Delete the `.cleaned` files (the swap was refused or failed)."""
        for cleaned, _ in self.groups:
            cleaned.delete()


class CleaningAborted(Exception):
    """The cleaning was asked to stop (the broker is shutting down)."""


class OffsetMapTooSmallError(Exception):
    """The offset map cannot hold even the keys of the first dirty batch: no cleaning
    can make progress with this log.cleaner.dedupe.buffer.size."""


def clean(
    plan: CleanPlan,
    should_stop: Callable[[], bool] | None = None,
    *,
    offset_map_memory: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    throttler: Throttler | None = None,
) -> CleanResult:
    """Build the offset map and write the cleaned segments; touches no live state.

    Reads the old segments through descriptors of its own, so it may run on another
    thread while the owner appends to the active segment. A segment that disappears
    meanwhile (retention, truncation) makes this raise OSError: nothing is swapped then.
    `should_stop` is asked between segments; when it says so, CleaningAborted is raised
    and no `.cleaned` file is left. `offset_map_memory` is this cleaning's share of
    log.cleaner.dedupe.buffer.size; `throttler` is told every byte read and written
    (log.cleaner.io.max.bytes.per.second).
    """
    started = time.monotonic()
    stop = should_stop or (lambda: False)
    stats = CleanerStats()
    offset_map, full = _build_offset_map(plan, stats, stop, offset_map_memory, throttler)
    end = plan.end_offset
    if full:
        end = offset_map.latest_offset + 1
        if end <= plan.first_dirty_offset:
            raise OffsetMapTooSmallError(
                f"The offset map of {offset_map.memory} bytes cannot hold the keys of the"
                f" batch at offset {plan.first_dirty_offset} of {plan.name}: raise"
                " log.cleaner.dedupe.buffer.size or lower log.cleaner.threads"
            )
        logger.info(
            "Offset map of %s full at offset %d (%d keys): cleaning up to it",
            plan.name,
            end,
            len(offset_map),
        )
    stats.buffer_utilization = offset_map.utilization
    result = CleanResult(plan, end, stats=stats)
    latest = _LatestOffsets(offset_map)
    try:
        for group in _group_segments(plan, end):
            if stop():
                raise CleaningAborted(plan.name)
            cleaned = _clean_group(plan, group, offset_map, latest, end, stats, throttler)
            result.groups.append((cleaned, group))
    except BaseException:
        result.discard()
        raise
    result.stats.elapsed_s = time.monotonic() - started
    return result


def _read_batches(segment: LogSegment) -> Iterable[tuple[BatchHeader, bytes]]:
    records = FileRecords(segment.log.path, mutable=False)
    try:
        for _, header, chunk in records.batches(0, whole=True, chunk_size=RECOVERY_CHUNK):
            # One batch's own bytes, its header positioned at 0 in them.
            start = header.position
            header.position = 0
            yield header, bytes(chunk[start : start + header.size])
    finally:
        records.close()


def _build_offset_map(
    plan: CleanPlan,
    stats: CleanerStats,
    stop: Callable[[], bool],
    memory: int,
    throttler: Throttler | None,
) -> tuple[OffsetMap, bool]:
    """key -> offset of its latest record in [first dirty, end) (Kafka's buildOffsetMap),
    and whether the map filled up before the end (it then covers the batches up to its
    latest offset)."""
    offset_map = OffsetMap(memory, DEFAULT_LOAD_FACTOR)
    first_dirty = plan.first_dirty_offset
    txns = _TransactionTracker(plan.aborted_txns)
    for segment in plan.segments:
        if _next_base(plan, segment) <= first_dirty:
            continue
        if stop():
            raise CleaningAborted(plan.name)
        for header, buffer in _read_batches(segment):
            if header.next_offset <= first_dirty:
                continue
            if header.base_offset >= plan.end_offset:
                break
            stats.map_bytes_read += header.size
            if throttler is not None:
                throttler.maybe_throttle(header.size)
            if header.is_control:
                txns.on_control_batch(header, buffer)
            elif not txns.on_batch(header):  # aborted data is no value of its key
                # A key mapped already moves to its later offset at no cost in memory
                # (most keys of a log worth compacting): set in the dict in line, not
                # through put, which weighs a new key against the map's memory.
                entries = offset_map.entries
                mapped = 0
                for offset, key, _ in scan_record_keys(buffer, header):
                    if key is None or offset < first_dirty:
                        continue
                    if key in entries:
                        entries[key] = offset
                    elif not offset_map.put(key, offset):
                        stats.map_records += mapped
                        return offset_map, True
                    mapped += 1
                stats.map_records += mapped
            offset_map.latest_offset = header.last_offset
    return offset_map, False


def _next_base(plan: CleanPlan, segment: LogSegment) -> int:
    i = plan.segments.index(segment)
    return plan.segments[i + 1].base_offset if i + 1 < len(plan.segments) else plan.end_offset


def _group_segments(plan: CleanPlan, end: int) -> list[list[LogSegment]]:
    """Consecutive segments below `end` whose cleaned output fits one segment (Kafka's
    groupSegmentsBySize): at most segment.bytes of log, segment.index.bytes of offset
    index, and offsets within an int32 of the group's base."""
    groups: list[list[LogSegment]] = []
    segments = [
        (segment, size)
        for segment, size in zip(plan.segments, plan.sizes, strict=True)
        if segment.base_offset < end
    ]
    while segments:
        group = [segments[0][0]]
        log_size = segments[0][1]
        index_size = segments[0][0].offset_index.entries * 8
        segments = segments[1:]
        while segments:
            segment, size = segments[0]
            upper = _next_base(plan, segment)
            if (
                log_size + size > plan.config.segment_bytes
                or index_size + segment.offset_index.entries * 8 > plan.config.max_index_size
                or upper - 1 - group[0].base_offset > INT32_MAX
            ):
                break
            group.append(segment)
            log_size += size
            index_size += segment.offset_index.entries * 8
            segments = segments[1:]
        groups.append(group)
    return groups


def _clean_group(
    plan: CleanPlan,
    group: list[LogSegment],
    offset_map: OffsetMap,
    latest: _LatestOffsets,
    end: int,
    stats: CleanerStats,
    throttler: Throttler | None,
) -> LogSegment:
    config = plan.config
    base = group[0].base_offset
    for suffix_file in (
        files.log_file(plan.directory, base, files.CLEANED_FILE_SUFFIX),
        files.offset_index_file(plan.directory, base, files.CLEANED_FILE_SUFFIX),
        files.time_index_file(plan.directory, base, files.CLEANED_FILE_SUFFIX),
        files.txn_index_file(plan.directory, base, files.CLEANED_FILE_SUFFIX),
    ):
        suffix_file.unlink(missing_ok=True)  # left by an earlier cleaning that failed
    cleaned = LogSegment(
        plan.directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        created_ms=group[-1].created_ms,
        file_suffix=files.CLEANED_FILE_SUFFIX,
    )
    try:
        group_end = _next_base(plan, group[-1])
        in_range = [
            txn
            for txn in plan.aborted_txns
            if txn.first_offset < group_end and txn.last_offset >= base
        ]
        txns = _TransactionTracker(in_range, cleaned)
        for segment in group:
            for header, buffer in _read_batches(segment):
                stats.bytes_read += header.size
                stats.records_read += header.record_count
                if throttler is not None:
                    throttler.maybe_throttle(header.size)
                kept = _filter_batch(plan, header, buffer, offset_map, latest, end, txns, stats)
                if kept is None:
                    continue
                kept_header, kept_bytes = kept
                if throttler is not None:
                    throttler.maybe_throttle(len(kept_bytes))
                cleaned.append(
                    kept_header.last_offset,
                    kept_header.max_timestamp,
                    kept_header.last_offset,
                    kept_bytes,
                    [kept_header],
                )
                stats.bytes_written += len(kept_bytes)
        cleaned.on_become_inactive_segment()
        cleaned.flush()
        cleaned.close()
    except BaseException:
        cleaned.delete()
        raise
    return cleaned


class _TransactionTracker:
    """Which batches belong to aborted transactions, and which markers nothing needs any
    more (Kafka's CleanedTransactionMetadata). Given `cleaned`, the aborted transactions
    whose marker is kept with data of theirs are indexed in its `.txnindex`."""

    def __init__(self, aborted: list[AbortedTxn], cleaned: LogSegment | None = None) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        # producer id -> (its aborted transaction, whether a batch of it was seen)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._ongoing_committed: set[int] = set()
        self._cleaned = cleaned

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: BatchHeader) -> bool:
        """Whether this data batch is aborted data (which may be discarded)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, buffer: bytes) -> bool:
        """Whether this marker may be discarded (once its delete horizon has passed)."""
        self._consume_up_to(header.last_offset)
        marker = read_end_txn_marker(buffer, header)
        if marker is None:
            return False
        if marker.is_abort:
            ongoing = self._ongoing_aborted.pop(header.producer_id, None)
            if ongoing is not None and ongoing[1]:
                if self._cleaned is not None:
                    self._cleaned.txn_index.append(ongoing[0])
                return False
            return True
        if header.producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(header.producer_id)
            return False
        return True


class _LatestOffsets:
    """The offsets the offset map points at, in order. In the dirty section every keyed
    record was mapped (the first pass reads each batch there whole), so a record there
    stays only when the map points at its offset: a batch holding none of these offsets
    has nothing to keep, whatever its records say."""

    def __init__(self, offset_map: OffsetMap) -> None:
        self._offsets = sorted(offset_map.entries.values())

    def any_within(self, first: int, last: int) -> bool:
        offsets = self._offsets
        i = bisect.bisect_left(offsets, first)
        return i < len(offsets) and offsets[i] <= last


def _filter_batch(
    plan: CleanPlan,
    header: BatchHeader,
    buffer: bytes,
    offset_map: OffsetMap,
    latest: _LatestOffsets,
    end: int,
    txns: _TransactionTracker,
    stats: CleanerStats,
) -> tuple[BatchHeader, bytes] | None:
    """The batch as it is kept (the original bytes when nothing changes), or None.
    Records from `end` on are past the offset map: nothing known shadows them."""
    now = plan.now_ms
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None
    if header.is_control:
        can_discard = txns.on_control_batch(header, buffer)
        discard_records = can_discard and horizon is not None and horizon <= now
    else:
        can_discard = txns.on_batch(header)
        discard_records = can_discard
    last = plan.active_producers.get(header.producer_id) if header.producer_id >= 0 else None
    producers_last = last is not None and (
        header.last_offset == last.last_data_offset
        if last.last_data_offset is not None
        else header.is_control and header.producer_epoch == last.producer_epoch
    )
    if discard_records:
        if producers_last:
            return _empty_batch(header)
        return None
    marker_of_empty_txn = header.is_control and can_discard
    if header.is_control:
        records = decode_records(buffer, header)
        if marker_of_empty_txn and horizon is None:
            return _rebuild(header, records, now + plan.config.delete_retention_ms)
        stats.records_kept += len(records)
        return header, buffer
    # A batch of the dirty section whose every record a later one shadows (most of them,
    # in a log with many updates per key) goes without its records being read again.
    if (
        header.base_offset >= plan.first_dirty_offset
        and header.last_offset < end
        and not latest.any_within(header.base_offset, header.last_offset)
    ):
        return _empty_batch(header) if producers_last else None
    # Which records stay, from their keys alone: a batch kept whole or dropped whole is
    # never decoded.
    keys = scan_record_keys(buffer, header)
    latest_offset_of = offset_map.entries.get
    expired = horizon is not None and now >= horizon  # tombstones past the horizon go
    staying = [
        offset >= end
        or (key is not None and offset >= latest_offset_of(key, -1) and not (tombstone and expired))
        for offset, key, tombstone in keys
    ]
    if not any(staying):
        return _empty_batch(header) if producers_last else None
    # Kept whole, unless a tombstone in it still needs its batch to get a delete horizon.
    if all(staying) and not (horizon is None and any(t for _, _, t in keys)):
        stats.records_kept += len(keys)
        return header, buffer
    records = decode_records(buffer, header)
    kept: list[Record] = []
    tombstones = False
    entries = offset_map.entries
    for record in records:
        if record.offset >= end:
            # Past the map, kept as they are; a tombstone among them still gets its
            # batch a delete horizon, as Kafka's filterTo does.
            kept.append(record)
            tombstones = tombstones or record.value is None
            continue
        if record.key is None:
            continue  # Kafka drops keyless records from a compacted log
        if record.offset < entries.get(record.key, -1):
            continue
        if record.value is None:
            if horizon is not None and now >= horizon:
                continue  # a tombstone past its delete horizon
            tombstones = True
        kept.append(record)
    stats.records_kept += len(kept)
    if not kept:
        return _empty_batch(header) if producers_last else None
    set_horizon = tombstones and horizon is None
    if len(kept) == len(records) and not set_horizon:
        return header, buffer
    new_horizon = now + plan.config.delete_retention_ms if set_horizon else horizon
    return _rebuild(header, kept, new_horizon)


def _rebuild(
    header: BatchHeader, records: list[Record], delete_horizon: int | None
) -> tuple[BatchHeader, bytes]:
    """A batch of `records` with the original base offset, last offset, producer fields,
    codec and attributes (Kafka's buildRetainedRecordsInto), with a delete horizon."""
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon is not None:
        base_timestamp = delete_horizon
        attributes |= DELETE_HORIZON_BIT
    else:
        base_timestamp = records[0].timestamp
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    body = b"".join(
        encode_record(r, r.offset - header.base_offset, r.timestamp - base_timestamp)
        for r in records
    )
    body = compress(header.codec, body)
    return _assemble(header, attributes, base_timestamp, max_timestamp, len(records), body)


def _empty_batch(header: BatchHeader) -> tuple[BatchHeader, bytes]:
    """The header alone (Kafka's writeEmptyHeader): it keeps a producer's last sequence
    and epoch once none of its records is left."""
    attributes = header.attributes & ~(DELETE_HORIZON_BIT | 0x07)
    return _assemble(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _assemble(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
    body: bytes,
) -> tuple[BatchHeader, bytes]:
    new = BatchHeader(
        base_offset=header.base_offset,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=0,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=record_count,
    )
    buffer = bytearray(
        HEADER.pack(
            new.base_offset,
            new.batch_length,
            new.partition_leader_epoch,
            new.magic,
            0,
            new.attributes,
            new.last_offset_delta,
            new.base_timestamp,
            new.max_timestamp,
            new.producer_id,
            new.producer_epoch,
            new.base_sequence,
            new.record_count,
        )
    )
    buffer += body
    new.crc = compute_crc(buffer, new)
    struct.pack_into(">I", buffer, CRC_OFFSET, new.crc)
    return new, bytes(buffer)


# --- the log's side ---------------------------------------------------------------------------


class _ProducerEntry(Protocol):
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def last_data_offset(self) -> int: ...


class _CleanableLog(Protocol):
    """What plan_cleaning reads of a log (storage.log.Log provides it)."""

    @property
    def name(self) -> str: ...
    @property
    def dir(self) -> Path: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def segments(self) -> list[LogSegment]: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    def active_producers(self) -> Sequence[_ProducerEntry]: ...


def describe(result: CleanResult) -> str:
    stats = result.stats
    mb = stats.bytes_read / 1e6
    rate = mb / stats.elapsed_s if stats.elapsed_s > 0 else 0.0
    return (
        f"Cleaned {result.plan.name} up to offset {result.end_offset}:"
        f" {len(result.groups)} segment(s) from {sum(len(g) for _, g in result.groups)},"
        f" {mb:.1f} MB read, {stats.bytes_written / 1e6:.1f} MB written,"
        f" {stats.records_read} records read, {stats.records_kept} kept,"
        f" {stats.elapsed_s:.2f} s ({rate:.1f} MB/s), dirty ratio {result.plan.dirty_ratio:.2f},"
        f" offset map {100 * stats.buffer_utilization:.1f}% full"
    )
