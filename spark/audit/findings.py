"""What the audit can find: every check by name, and the row a finding becomes.

A check belongs to a category: `integrity` (the files are damaged or disagree with
each other: a broker would truncate, rebuild or refuse them) or `semantics` (the files
are whole, but what they record is worth a look: duplicates, gaps, disorder, open
transactions). Integrity findings are errors and make the audit's exit status
non-zero; semantics findings are warnings or, for what is normal in some logs (an
aborted transaction, the offset gaps compaction leaves), information.

Each finding is one row of findings.parquet: the check's name, where (topic,
partition, segment, position, offset, producer id, whichever apply) and a message
that says what is wrong in the words of the files (offsets, positions, epochs).
A check that fires many times in one partition keeps its first (or, for timestamps,
its largest) `max_findings` rows; the counts in summary.json are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

INTEGRITY = "integrity"
SEMANTICS = "semantics"

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    category: str
    severity: str
    description: str


def _checks(*checks: Check) -> dict[str, Check]:
    return {check.name: check for check in checks}


CHECKS = _checks(
    # --- integrity: the batches of the .log files ---------------------------------------
    Check("crc_mismatch", INTEGRITY, ERROR, "a batch's CRC32C does not match its bytes"),
    Check(
        "undecodable_records",
        INTEGRITY,
        ERROR,
        "a batch passes its CRC but its records (or its control record) do not decode",
    ),
    Check("torn_tail", INTEGRITY, ERROR, "a segment ends part way through a batch"),
    Check(
        "unreadable_bytes",
        INTEGRITY,
        ERROR,
        "bytes where a batch should start that are not a v2 batch (magic byte, length)",
    ),
    Check(
        "batch_backwards",
        INTEGRITY,
        ERROR,
        "a batch starts below the base offset of the batch before it in the partition",
    ),
    Check(
        "batch_overlap",
        INTEGRITY,
        ERROR,
        "a batch starts at or below the last offset of the batch before it",
    ),
    Check(
        "batch_below_segment_base",
        INTEGRITY,
        ERROR,
        "a batch's base offset is below its segment's base offset (the file's name)",
    ),
    # --- integrity: the files beside the segments ---------------------------------------
    Check(
        "offset_index_mismatch",
        INTEGRITY,
        ERROR,
        "a .index entry does not point at the start of the batch whose last offset it names",
    ),
    Check(
        "time_index_mismatch",
        INTEGRITY,
        ERROR,
        "a .timeindex entry does not name a batch with its timestamp as the segment's"
        " largest so far",
    ),
    Check(
        "leader_epoch_mismatch",
        INTEGRITY,
        ERROR,
        "batches carry a partition leader epoch other than the leader-epoch-checkpoint's"
        " epoch for their offsets",
    ),
    Check(
        "snapshot_mismatch",
        INTEGRITY,
        ERROR,
        "a producer-state .snapshot differs from the state the log's batches give at its offset",
    ),
    Check(
        "txn_index_mismatch",
        INTEGRITY,
        ERROR,
        "a segment's .txnindex differs from the aborted transactions its ABORT markers end",
    ),
    Check(
        "file_unreadable",
        INTEGRITY,
        ERROR,
        "an index, snapshot, txn index or checkpoint file that does not parse",
    ),
    # --- semantics ---------------------------------------------------------------------
    Check(
        "timestamp_regression",
        SEMANTICS,
        WARNING,
        "a record's timestamp is below the largest timestamp before it in the partition",
    ),
    Check(
        "timestamp_before_bound",
        SEMANTICS,
        WARNING,
        "a CreateTime timestamp older than an earlier-appended record's by more than"
        " log.message.timestamp.before.max.ms (KIP-937 would have rejected it)",
    ),
    Check(
        "timestamp_after_bound",
        SEMANTICS,
        WARNING,
        "a CreateTime timestamp newer than every later-appended record's by more than"
        " log.message.timestamp.after.max.ms (KIP-937 would have rejected it)",
    ),
    Check(
        "duplicate_batch",
        SEMANTICS,
        WARNING,
        "one producer's batch (same id, epoch and sequence) written at two offsets",
    ),
    Check(
        "sequence_gap",
        SEMANTICS,
        WARNING,
        "a producer's batch starts past the sequence after its previous batch's last",
    ),
    Check(
        "sequence_out_of_order",
        SEMANTICS,
        WARNING,
        "a producer's batch starts below the sequence after its previous batch's last"
        " (and is no duplicate of it)",
    ),
    Check(
        "open_transaction",
        SEMANTICS,
        WARNING,
        "a producer's transactional batches with no COMMIT or ABORT marker after them",
    ),
    Check("aborted_transaction", SEMANTICS, INFO, "a transaction ended by an ABORT marker"),
    Check(
        "marker_without_data",
        SEMANTICS,
        INFO,
        "a COMMIT or ABORT marker with no transactional batch of its producer before it"
        " (normal once compaction removed the data)",
    ),
    Check(
        "offset_gap",
        SEMANTICS,
        INFO,
        "offsets missing between two batches (normal after compaction)",
    ),
    Check(
        "undecodable_coordinator_record",
        SEMANTICS,
        WARNING,
        "a __consumer_offsets or __transaction_state record that does not parse as Kafka's schemas",
    ),
)

FINDINGS_SCHEMA = pa.schema(
    [
        pa.field("check", pa.string()),
        pa.field("category", pa.string()),
        pa.field("severity", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("segment", pa.int64()),  # the segment's base offset
        pa.field("position", pa.int64()),  # bytes into the segment's .log
        pa.field("offset", pa.int64()),
        pa.field("producer_id", pa.int64()),
        pa.field("message", pa.string()),
    ]
)

# The columns a finding is made of before its category and severity are added.
LOCATION = ("topic", "partition", "segment", "position", "offset", "producer_id")


def finding(
    check: str,
    topic: str,
    partition: int,
    message: str,
    *,
    segment: int | None = None,
    position: int | None = None,
    offset: int | None = None,
    producer_id: int | None = None,
) -> dict[str, Any]:
    """One finding as a row of FINDINGS_SCHEMA."""
    known = CHECKS[check]
    return {
        "check": check,
        "category": known.category,
        "severity": known.severity,
        "topic": topic,
        "partition": partition,
        "segment": segment,
        "position": position,
        "offset": offset,
        "producer_id": producer_id,
        "message": message,
    }


class FindingLimiter:
    """Findings of one partition, at most `limit` kept per check, every one counted."""

    def __init__(self, topic: str, partition: int, limit: int) -> None:
        self.topic = topic
        self.partition = partition
        self.limit = limit
        self.kept: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}

    def add(self, check: str, message: str, **where: int | None) -> None:
        count = self.counts.get(check, 0)
        self.counts[check] = count + 1
        if count < self.limit:
            self.kept.append(finding(check, self.topic, self.partition, message, **where))
