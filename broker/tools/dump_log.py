"""`brook dump-log`: print and check a partition's files, like Kafka's DumpLogSegments.

No broker is needed: the files are read through brook.storage.reader, read-only (no
file is created, changed or locked), whether Brook or Apache Kafka wrote them. This
module is presentation and checks; the formats are the storage layer's. Output lines
use DumpLogSegments' field names so they read as operators expect:

    Dumping /data/orders-0/00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 2 count: 3 ... position: 0 CreateTime: 1700000000000 size: 95 ...
    | offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 ... key: k1 payload: hello

Index files are checked against their segment: every offset-index entry must sit at
the start of the batch whose last offset it names, every time-index entry must name
a batch whose max timestamp is the entry's and the largest so far, and entries must
increase. A failed check, a torn or corrupt batch, or an unreadable file makes the exit
code 1 (Kafka's tool reports these but exits 0; a script wants to know).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError, KafkaError
from brook.protocol.record_batch import DELETE_HORIZON_BIT, BatchHeader, Record
from brook.storage.end_transaction_marker import control_type, parse_end_txn_marker
from brook.storage.errors import StorageError
from brook.storage.index_check import (
    SegmentScan,
    check_offset_index,
    check_time_index,
    scan_segment,
)
from brook.storage.log_file_utils import offset_from_file_name
from brook.storage.reader import (
    Batch,
    Damage,
    OffsetIndex,
    SegmentReader,
    TimeIndex,
    TransactionIndex,
    read_leader_epoch_checkpoint,
    read_snapshot,
)

from .common import stdout_closed

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
INDEX_SUFFIXES = (".index", ".timeindex")
CODEC_NAMES = {codec.value: codec.name.lower() for codec in Codec}

EPILOG = """\
files: .log segments, .index, .timeindex, .txnindex, .snapshot (producer state) and
leader-epoch-checkpoint; a directory stands for every such file in it.

examples:
  brook dump-log /var/lib/brook/orders-0/00000000000000000000.log
  brook dump-log --print-data-log /var/lib/kafka/orders-0
  brook dump-log --verify-index-only /var/lib/brook/orders-0

exit code 0 when every file reads and every check passes, 1 otherwise.
"""


class DumpError(Exception):
    """A file this tool cannot make sense of (e.g. an index not named by an offset)."""


@dataclass
class Options:
    deep: bool
    print_data: bool
    verify_only: bool
    sanity_only: bool


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "dump-log",
        help="print and check segment, index and snapshot files (like DumpLogSegments)",
        description="Print the batches and records of segment files and the entries of index,\n"
        "snapshot and leader-epoch files, and check indexes against their segments.\n"
        "The files are read directly, read-only (no broker needed), whether Brook or\n"
        "Apache Kafka wrote them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="FILE", help="files or directories")
    parser.add_argument(
        "--files",
        metavar="FILE[,FILE...]",
        help="comma-separated files, as DumpLogSegments takes them",
    )
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print every record of every batch (offset, timestamp, sizes, header keys)",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print every record with its key, payload and headers (implies --deep-iteration)",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index files against their segments; print one line per index: what"
        " was verified, or what is wrong",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="check index files; print one line per index: passed, or what is wrong",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    paths = list(args.paths)
    if args.files:
        paths += [Path(item) for item in args.files.split(",") if item.strip()]
    if not paths:
        print("brook dump-log: error: give at least one file or directory", file=sys.stderr)
        return 2
    options = Options(
        deep=args.deep_iteration or args.print_data_log,
        print_data=args.print_data_log,
        verify_only=args.verify_index_only,
        sanity_only=args.index_sanity_check,
    )
    ok = True
    try:
        for path in _expand(paths):
            ok &= _dump_one(path, options)
    except BrokenPipeError:
        return stdout_closed()
    return 0 if ok else 1


def _expand(paths: Iterable[Path]) -> Iterable[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.is_file() and _known(p))
        else:
            yield path


def _known(path: Path) -> bool:
    return path.suffix in SUFFIXES or path.name == LEADER_EPOCH_CHECKPOINT


def _fail(path: Path, message: str) -> bool:
    sys.stdout.flush()
    print(f"brook dump-log: error: {path}: {message}", file=sys.stderr)
    return False


def _dump_one(path: Path, options: Options) -> bool:
    if not path.exists():
        return _fail(path, "no such file or directory")
    if not _known(path):
        return _fail(
            path,
            "unknown file type (expected .log, .index, .timeindex, .txnindex, .snapshot"
            " or leader-epoch-checkpoint)",
        )
    checking = options.verify_only or options.sanity_only
    if checking and path.suffix not in INDEX_SUFFIXES:
        return True  # the checks are about indexes; other files are read for them
    if not checking:
        print(f"Dumping {path}")
    try:
        if path.suffix == ".log":
            return _dump_log(path, options)
        if path.suffix == ".index":
            return _dump_offset_index(path, options)
        if path.suffix == ".timeindex":
            return _dump_time_index(path, options)
        if path.suffix == ".txnindex":
            return _dump_txn_index(path)
        if path.suffix == ".snapshot":
            return _dump_snapshot(path)
        return _dump_leader_epochs(path)
    except (StorageError, DumpError) as exc:
        return _fail(path, str(exc))
    except OSError as exc:
        return _fail(path, exc.strerror or str(exc))


# --- segments -----------------------------------------------------------------------------


def _dump_log(path: Path, options: Options) -> bool:
    with SegmentReader(path) as segment:
        if segment.base_offset is not None:
            print(f"Log starting offset: {segment.base_offset}")
        return _dump_batches(segment, options)


def _dump_batches(segment: SegmentReader, options: Options) -> bool:
    path = segment.path
    ok = True
    last_offset: int | None = None
    for item in segment.batches():
        if isinstance(item, Damage):
            print(
                f"Found {item.invalid_bytes} invalid bytes at position {item.position}"
                f" of {path.name}: {item.reason}"
            )
            return False
        header = item.header
        valid = item.crc_is_valid()
        print(_batch_line(item, valid))
        ok &= valid
        if last_offset is not None and header.base_offset <= last_offset:
            print(
                f"Offsets go backwards: the batch at position {item.position} starts at"
                f" {header.base_offset}, after a batch that ended at {last_offset}"
            )
            ok = False
        last_offset = header.last_offset
        if options.deep and valid:
            ok &= _dump_records(item, options)
    return ok


def _timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.is_log_append_time else "CreateTime"


def _batch_line(batch: Batch, valid: bool) -> str:
    header = batch.header
    delete_horizon = (
        str(header.base_timestamp) if header.attributes & DELETE_HORIZON_BIT else "none"
    )
    codec = CODEC_NAMES.get(header.codec, f"unknown({header.codec})")
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset}"
        f" count: {header.record_count} baseSequence: {header.base_sequence}"
        f" lastSequence: {header.last_sequence} producerId: {header.producer_id}"
        f" producerEpoch: {header.producer_epoch}"
        f" partitionLeaderEpoch: {header.partition_leader_epoch}"
        f" isTransactional: {_bool(header.is_transactional)}"
        f" isControl: {_bool(header.is_control)} deleteHorizonMs: {delete_horizon}"
        f" position: {batch.position} {_timestamp_type(header)}: {header.max_timestamp}"
        f" size: {header.size} magic: {header.magic} compresscodec: {codec}"
        f" crc: {header.crc} isvalid: {_bool(valid)}"
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _dump_records(batch: Batch, options: Options) -> bool:
    header = batch.header
    try:
        records = batch.records()
    except KafkaError as exc:
        print(f"| the records of the batch at position {batch.position} do not decode: {exc}")
        return False
    for record in records:
        print(_record_line(header, record, options))
    return True


def _record_line(header: BatchHeader, record: Record, options: Options) -> str:
    timestamp = header.max_timestamp if header.is_log_append_time else record.timestamp
    sequence = -1
    if header.base_sequence >= 0:
        sequence = (header.base_sequence + record.offset - header.base_offset) % (1 << 31)
    header_keys = ", ".join(name for name, _ in record.headers)
    line = (
        f"| offset: {record.offset} {_timestamp_type(header)}: {timestamp}"
        f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
        f" sequence: {sequence} headerKeys: [{header_keys}]"
    )
    if header.is_control:
        return f"{line} {_control_text(record)}"
    if options.print_data:
        headers = ", ".join(f"{name}={_text(value)}" for name, value in record.headers)
        line += f" key: {_text(record.key)} payload: {_text(record.value)} headers: [{headers}]"
    return line


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes | None) -> str:
    # Kafka prints keys and payloads as UTF-8; bytes that are not are escaped, so
    # binary data stays visible and one record stays on one line.
    if data is None:
        return "null"
    text = data.decode("utf-8", "backslashreplace")
    return text.replace("\n", "\\n").replace("\r", "\\r")


def _control_text(record: Record) -> str:
    """A control record as Kafka's DumpLogSegments prints it: a transaction marker as
    `endTxnMarker: COMMIT coordinatorEpoch: 0`, another control type by its number."""
    try:
        marker = parse_end_txn_marker(record.key, record.value)
        if marker is None:
            return f"controlType: {control_type(record.key)}"
    except CorruptRecordError as exc:
        return f"controlRecord: ({exc.message or exc})"
    return f"endTxnMarker: {marker.name} coordinatorEpoch: {marker.coordinator_epoch}"


# --- indexes ------------------------------------------------------------------------------


def _segment_for(index_path: Path) -> tuple[int, SegmentScan | None]:
    base_offset = offset_from_file_name(index_path.name)
    if base_offset is None:
        raise DumpError(
            "an index file is named by its segment's base offset (20 digits); this name"
            " is not, so its relative offsets cannot be resolved"
        )
    log_path = index_path.with_suffix(".log")
    if not log_path.is_file():
        return base_offset, None
    with SegmentReader(log_path) as segment:
        return base_offset, scan_segment(segment)


def _report(
    path: Path, problems: list[str], options: Options, scan: SegmentScan | None, entries: int
) -> bool:
    if scan is None:
        print(f"{path}: no segment {path.with_suffix('.log').name} beside it; entries not checked")
    elif scan.damage is not None:
        problems.append(
            f"the segment is damaged at position {scan.damage.position}"
            f" ({scan.damage.reason}); entries past it cannot be checked"
        )
    if problems:
        print(f"Mismatches in {path}:")
        for problem in problems:
            print(f"  {problem}")
        return False
    if options.sanity_only:
        print(f"{path} passed sanity check.")
    elif options.verify_only and scan is not None:
        # Say what was checked, so that a clean run is not mistaken for one that
        # found nothing to check.
        print(
            f"{path}: {entries} entries verified against {path.with_suffix('.log').name}"
            f" ({len(scan.positions)} batches): no mismatch"
        )
    return True


def _dump_offset_index(path: Path, options: Options) -> bool:
    base_offset, scan = _segment_for(path)
    index = OffsetIndex(path, base_offset, writable=False)
    entries = [index.entry(n) for n in range(index.entries)]  # as stored, unchecked
    if not (options.verify_only or options.sanity_only):
        for offset, position in entries:
            print(f"offset: {offset} position: {position}")
    problems = [problem.message for problem in check_offset_index(entries, scan)]
    return _report(path, problems, options, scan, len(entries))


def _dump_time_index(path: Path, options: Options) -> bool:
    base_offset, scan = _segment_for(path)
    index = TimeIndex(path, base_offset, writable=False)
    entries = [index.entry(n) for n in range(index.entries)]  # as stored, unchecked
    if not (options.verify_only or options.sanity_only):
        for timestamp, offset in entries:
            print(f"timestamp: {timestamp} offset: {offset}")
    problems = [problem.message for problem in check_time_index(entries, scan)]
    return _report(path, problems, options, scan, len(entries))


def _dump_txn_index(path: Path) -> bool:
    # The start offset matters only to sanity_check(); a file not named by one still reads.
    index = TransactionIndex(path, offset_from_file_name(path.name) or 0)
    for entry in index.all_aborted_txns():
        print(
            f"version: {entry.version} producerId: {entry.producer_id}"
            f" firstOffset: {entry.first_offset} lastOffset: {entry.last_offset}"
            f" lastStableOffset: {entry.last_stable_offset}"
        )
    return True


# --- producer state and leader epochs -----------------------------------------------------


def _dump_snapshot(path: Path) -> bool:
    for entry in read_snapshot(path):
        first_txn = entry.current_txn_first_offset
        print(
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
            f" coordinatorEpoch: {entry.coordinator_epoch}"
            f" currentTxnFirstOffset: {first_txn if first_txn >= 0 else 'none'}"
            f" lastTimestamp: {entry.timestamp} lastSequence: {entry.last_sequence}"
            f" lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta}"
        )
    return True


def _dump_leader_epochs(path: Path) -> bool:
    for entry in read_leader_epoch_checkpoint(path):
        print(f"epoch: {entry.epoch} startOffset: {entry.start_offset}")
    return True
