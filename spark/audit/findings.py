"""What the audit can find: every check by name, and the row a finding becomes.

A check belongs to a category: `integrity` (the files are damaged, incomplete or
disagree with each other: a broker would truncate, rebuild or refuse them, or records
are gone) or `semantics` (what the batches record: duplicates, sequence gaps,
disorder, transactions). Its severity says what a finding means: an error is data
lost or written wrong (every integrity check, a duplicate batch, a producer's
sequence gap, a COMMIT whose data is not there), and any error makes the audit's exit
status non-zero; a warning is worth a look; information is what is normal in some
logs (an aborted transaction, the offset gaps compaction leaves). An error's check
says what to do about it (`advice`), which the report's banner repeats.

Each finding is one row of findings.parquet: the check's name, where (topic,
partition, segment, position, offset, producer id, whichever apply) and a message
that says what is wrong in the words of the files (offsets, positions, epochs).
A check that fires many times in one partition keeps its first (or, for timestamps,
its largest) `max_findings` rows; the counts in summary.json are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

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
    advice: str = ""  # what to do about a finding (every error check has one)


def _checks(*checks: Check) -> dict[str, Check]:
    return {check.name: check for check in checks}


CHECKS = _checks(
    # --- integrity: the batches of the .log files ---------------------------------------
    Check(
        "crc_mismatch",
        INTEGRITY,
        ERROR,
        "a batch's CRC32C does not match its bytes",
        "The batch's bytes changed after it was written (disk, copy or memory):"
        " restore the partition from another replica or a backup.",
    ),
    Check(
        "undecodable_records",
        INTEGRITY,
        ERROR,
        "a batch passes its CRC but its records (or its control record) do not decode",
        "The batch was written wrong, or changed in a way its CRC does not catch:"
        " restore the partition from another replica or a backup.",
    ),
    Check(
        "torn_tail",
        INTEGRITY,
        ERROR,
        "a segment ends part way through a batch",
        "A write was cut short (a crash, a full disk, a copy of a running broker's"
        " files): a broker truncates the segment there on start; audit a stopped broker's"
        " files, or restore the lost batches from another replica.",
    ),
    Check(
        "unreadable_bytes",
        INTEGRITY,
        ERROR,
        "bytes where a batch should start that are not a v2 batch (magic byte, length)",
        "The segment is damaged from there on: restore it from another replica or a"
        " backup (a broker would truncate the log there).",
    ),
    Check(
        "batch_backwards",
        INTEGRITY,
        ERROR,
        "a batch starts below the base offset of the batch before it in the partition",
        "Offsets go back: the segment files are mixed up (restored from different"
        " times?) or damaged; restore the partition from another replica or a backup.",
    ),
    Check(
        "batch_overlap",
        INTEGRITY,
        ERROR,
        "a batch starts at or below the last offset of the batch before it",
        "Two batches claim the same offsets: the segment files are mixed up or"
        " damaged; restore the partition from another replica or a backup.",
    ),
    Check(
        "batch_below_segment_base",
        INTEGRITY,
        ERROR,
        "a batch's base offset is below its segment's base offset (the file's name)",
        "The segment's file name and its batches disagree (a renamed file, a flipped"
        " bit in the base offset): restore the segment from another replica or a backup.",
    ),
    # --- integrity: the files beside the segments ---------------------------------------
    Check(
        "offset_index_mismatch",
        INTEGRITY,
        ERROR,
        "a .index entry does not point at the start of the batch whose last offset it names",
        "Delete the segment's .index and .timeindex: a broker recovers a segment without"
        " them on start, rebuilding its indexes from the .log.",
    ),
    Check(
        "time_index_mismatch",
        INTEGRITY,
        ERROR,
        "a .timeindex entry does not name a batch with its timestamp as the segment's"
        " largest so far",
        "Delete the segment's .index and .timeindex: a broker recovers a segment without"
        " them on start, rebuilding its indexes from the .log.",
    ),
    Check(
        "leader_epoch_mismatch",
        INTEGRITY,
        ERROR,
        "batches carry a partition leader epoch other than the leader-epoch-checkpoint's"
        " epoch for their offsets",
        "Delete leader-epoch-checkpoint only on a single broker (it is rebuilt from the"
        " batches); in a cluster, let the replica fetch the partition again from its leader.",
    ),
    Check(
        "snapshot_mismatch",
        INTEGRITY,
        ERROR,
        "a producer-state .snapshot differs from the state the log's batches give at its offset",
        "Delete the .snapshot files: a broker rebuilds the producer state from the log"
        " (slower start).",
    ),
    Check(
        "txn_index_mismatch",
        INTEGRITY,
        ERROR,
        "a segment's .txnindex differs from the aborted transactions its ABORT markers end",
        "Delete the segment's .txnindex, .index and .timeindex: a broker recovers a segment"
        " without its indexes on start, rebuilding the .txnindex from its ABORT markers;"
        " until then read_committed consumers may be given aborted records.",
    ),
    Check(
        "file_unreadable",
        INTEGRITY,
        ERROR,
        "an index, snapshot, txn index or checkpoint file that does not parse",
        "Delete the file: a broker rebuilds indexes, snapshots and checkpoints (a"
        " checkpoint's loss makes it recover the whole log).",
    ),
    # --- integrity: the offsets the topic's cleanup.policy keeps ------------------------
    Check(
        "missing_offsets",
        INTEGRITY,
        ERROR,
        "offsets missing between two batches of a topic that is not compacted (its"
        " cleanup.policy has no compact): records lost",
        "Records are gone: a segment deleted or emptied, a copy of the log dir that"
        " missed files, a write lost. Restore the missing offsets' segment from another"
        " replica or a backup; if the topic is in fact compacted, give its cleanup.policy"
        " with --topic-configs.",
    ),
    # --- semantics ---------------------------------------------------------------------
    Check(
        "timestamp_regression",
        SEMANTICS,
        WARNING,
        "records whose timestamps are below the largest timestamp before them in the"
        " partition, counted once per record that set that largest timestamp (the cause:"
        " a timestamp ahead of the records after it, or a late record)",
    ),
    Check(
        "timestamp_before_bound",
        SEMANTICS,
        WARNING,
        "CreateTime timestamps older than an earlier-appended record's by more than"
        " log.message.timestamp.before.max.ms (KIP-937 would have rejected them), counted"
        " once per earlier record they are judged against",
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
        ERROR,
        "one producer's batch (same id, epoch and sequence) written at two offsets",
        "A retried batch was appended twice: consumers read its records twice. The log"
        " is readable as it is; find the writer that broke idempotence (the producer id"
        " and offsets are in the finding) and deduplicate downstream.",
    ),
    Check(
        "sequence_gap",
        SEMANTICS,
        ERROR,
        "a producer's batch starts past the sequence after its previous batch's last,"
        " with no compaction to explain it",
        "Batches of an idempotent producer are missing between two that remain: records"
        " lost (see missing_offsets if offsets are missing too). Restore the partition from"
        " another replica or a backup.",
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
        "commit_without_data",
        SEMANTICS,
        ERROR,
        "a COMMIT marker with no transactional batch of its producer before it, in a topic"
        " that is not compacted: the committed records are not in the log",
        "The transaction's records were lost (a segment deleted or emptied, a truncation):"
        " restore the partition from another replica or a backup.",
    ),
    Check(
        "marker_without_data",
        SEMANTICS,
        INFO,
        "a COMMIT or ABORT marker with no transactional batch of its producer before it:"
        " normal in a compacted topic once the cleaner removed the data, at the start of"
        " a log whose older segments retention deleted, and for an ABORT after a produce"
        " that failed",
    ),
    Check(
        "offset_gap",
        SEMANTICS,
        INFO,
        "offsets missing between two batches of a compacted topic (normal after compaction)",
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
