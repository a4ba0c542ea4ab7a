"""The audit's outputs: summary.json, Parquet tables (pyarrow) and report.html.

summary.json               status, exit status, totals, every check with its count,
                           per topic figures, the options and Spark used
findings.parquet           one row per finding kept (findings.FINDINGS_SCHEMA)
partitions.parquet         the statistics of each partition
transactions.parquet       one row per transaction of a producer in a partition
consumer_offsets.parquet   the committed offset of each group, topic and partition
groups.parquet             each classic group's metadata
transaction_state.parquet  each transactional id's state
report.html                all of it for a person, with charts (page.py)
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type information

from brook.storage.reader import PartitionFiles

from .cleanup_policies import CleanupPolicy
from .findings import CHECKS, ERROR, FINDINGS_SCHEMA, INTEGRITY, SEVERITIES
from .options import AuditOptions
from .stats import CODECS, TimeRange

Key = tuple[str, int]
TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")

PARTITIONS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("segments", pa.int32()),
        pa.field("size_on_disk", pa.int64()),  # bytes of the .log files
        pa.field("batches", pa.int64()),
        pa.field("bytes", pa.int64()),  # of the batches read whole
        pa.field("records", pa.int64()),
        pa.field("first_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("first_timestamp", TIMESTAMP_MS),
        pa.field("last_timestamp", TIMESTAMP_MS),
        *[pa.field(f"records_{codec}", pa.int64()) for codec in CODECS],
        pa.field("log_append_time_records", pa.int64()),
        pa.field("producers", pa.int64()),
        pa.field("transactional_batches", pa.int64()),
        pa.field("control_batches", pa.int64()),
        pa.field("keyed_records", pa.int64()),
        pa.field("distinct_keys", pa.int64()),
        pa.field("tombstones", pa.int64()),
        pa.field("shadowed_records", pa.int64()),
        pa.field("shadowed_share", pa.float64()),
        pa.field("timestamp_regressions", pa.int64()),
        pa.field("max_regression_ms", pa.int64()),
        pa.field("before_bound", pa.int64()),
        pa.field("after_bound", pa.int64()),
        pa.field("txn_committed", pa.int64()),
        pa.field("txn_aborted", pa.int64()),
        pa.field("txn_open", pa.int64()),
        pa.field("txn_markers_without_data", pa.int64()),
        pa.field("snapshots", pa.int32()),
        pa.field("leader_epochs", pa.string()),  # the checkpoint's "epoch@start" entries
        pa.field("integrity_findings", pa.int64()),
        pa.field("semantics_findings", pa.int64()),
    ]
)

CONSUMER_OFFSETS_SCHEMA = pa.schema(
    [
        pa.field("group", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("committed_offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp", TIMESTAMP_MS),
        pa.field("expire_timestamp", TIMESTAMP_MS),
        pa.field("pending_producer_id", pa.int64()),
        pa.field("coordinator_partition", pa.int32()),
        pa.field("log_offset", pa.int64()),
    ]
)

GROUPS_SCHEMA = pa.schema(
    [
        pa.field("group", pa.string()),
        pa.field("protocol_type", pa.string()),
        pa.field("generation", pa.int32()),
        pa.field("protocol", pa.string()),
        pa.field("leader", pa.string()),
        pa.field("members", pa.int32()),
        pa.field("member_ids", pa.list_(pa.string())),
        pa.field("client_ids", pa.list_(pa.string())),
        pa.field("current_state_timestamp", TIMESTAMP_MS),
        pa.field("coordinator_partition", pa.int32()),
        pa.field("log_offset", pa.int64()),
    ]
)

TRANSACTION_STATE_SCHEMA = pa.schema(
    [
        pa.field("transactional_id", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("status", pa.string()),
        pa.field("timeout_ms", pa.int32()),
        pa.field("partitions", pa.list_(pa.string())),
        pa.field("last_update_timestamp", TIMESTAMP_MS),
        pa.field("start_timestamp", TIMESTAMP_MS),
        pa.field("coordinator_partition", pa.int32()),
        pa.field("log_offset", pa.int64()),
    ]
)

TRANSACTIONS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("first_offset", pa.int64()),
        pa.field("last_data_offset", pa.int64()),
        pa.field("marker_offset", pa.int64()),
        pa.field("batches", pa.int64()),
        pa.field("records", pa.int64()),
        pa.field("marker", pa.string()),  # COMMIT, ABORT; null for an open transaction
        pa.field("outcome", pa.string()),  # committed, aborted, open, marker_without_data
    ]
)

OUTCOMES = ("committed", "aborted", "open", "marker_without_data")
_OUTCOME_COLUMNS = dict(
    zip(
        OUTCOMES,
        ("txn_committed", "txn_aborted", "txn_open", "txn_markers_without_data"),
        strict=True,
    )
)


@dataclass
class AuditData:
    """Everything the stages found, for the report."""

    options: AuditOptions
    partitions: list[PartitionFiles]
    policies: dict[str, CleanupPolicy] = field(default_factory=dict)  # by topic
    spark: dict[str, str] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    # Findings kept, from the partition tasks and from the DataFrame checks.
    file_findings: list[dict[str, Any]] = field(default_factory=list)
    frame_findings: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[tuple[str, str, int], int] = field(default_factory=dict)  # check, topic, p
    facts: dict[Key, dict[str, Any]] = field(default_factory=dict)
    stats: dict[Key, dict[str, Any]] = field(default_factory=dict)
    transactions: pa.Table | None = None
    regression_decades: list[dict[str, Any]] = field(default_factory=list)
    time_range: TimeRange | None = None
    over_time: list[dict[str, Any]] = field(default_factory=list)
    coordinator: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"consumer_offsets": [], "groups": [], "transaction_state": []}
    )
    elapsed_seconds: float = 0.0

    # --- derived ---------------------------------------------------------------------

    def check_counts(self) -> dict[str, int]:
        totals = dict.fromkeys(CHECKS, 0)
        for (check, _, _), count in self.counts.items():
            totals[check] += count
        return totals

    @property
    def integrity_failures(self) -> int:
        return sum(
            count
            for check, count in self.check_counts().items()
            if CHECKS[check].category == INTEGRITY
        )

    @property
    def errors(self) -> int:
        return sum(
            count for check, count in self.check_counts().items() if CHECKS[check].severity == ERROR
        )

    @property
    def exit_status(self) -> int:
        """1 when a check of severity error found something (data damaged or lost)."""
        return 1 if self.errors else 0

    def failed_checks(self) -> list[dict[str, Any]]:
        """Each error check that found something: how often, in which partitions, its
        first finding kept, and what to do."""
        failed: dict[str, dict[str, Any]] = {}
        for (check, topic, partition), count in sorted(self.counts.items()):
            if CHECKS[check].severity != ERROR or not count:
                continue
            entry = failed.setdefault(
                check,
                {
                    "check": check,
                    "count": 0,
                    "partitions": [],
                    "first": None,
                    "advice": CHECKS[check].advice,
                },
            )
            entry["count"] += count
            entry["partitions"].append(f"{topic}-{partition}")
        for row in self.findings_table().to_pylist():
            kept = failed.get(row["check"])
            if kept is not None and kept["first"] is None:
                kept["first"] = f"{row['topic']}-{row['partition']}: {row['message']}"
        return [failed[name] for name in CHECKS if name in failed]

    def findings_table(self) -> pa.Table:
        rows = sorted(
            self.file_findings + self.frame_findings,
            key=lambda f: (
                SEVERITIES.index(f["severity"]),
                f["topic"],
                f["partition"],
                f["check"],
                f["offset"] if f["offset"] is not None else -1,
            ),
        )
        return pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA)

    def outcome_counts(self) -> dict[Key, dict[str, int]]:
        counts: dict[Key, dict[str, int]] = {}
        if self.transactions is None:
            return counts
        columns = self.transactions.select(["topic", "partition", "outcome"]).to_pydict()
        for topic, partition, outcome in zip(
            columns["topic"], columns["partition"], columns["outcome"], strict=True
        ):
            per = counts.setdefault((topic, partition), dict.fromkeys(OUTCOMES, 0))
            per[outcome] += 1
        return counts

    def partition_rows(self) -> list[dict[str, Any]]:
        outcomes = self.outcome_counts()
        by_category: dict[Key, dict[str, int]] = {}
        for (check, topic, partition), count in self.counts.items():
            per = by_category.setdefault((topic, partition), {})
            category = CHECKS[check].category
            per[category] = per.get(category, 0) + count
        rows = []
        for listed in self.partitions:
            key = (listed.topic, listed.partition)
            stats = self.stats.get(key, {})
            facts = self.facts.get(key, {})
            row: dict[str, Any] = {name: stats.get(name) for name in PARTITIONS_SCHEMA.names}
            row.update(
                topic=listed.topic,
                partition=listed.partition,
                segments=len(listed.segments),
                size_on_disk=listed.size,
                snapshots=facts.get("snapshots", len(listed.snapshot_offsets)),
                leader_epochs=" ".join(f"{e}@{o}" for e, o in facts.get("leader_epochs", [])),
                integrity_findings=by_category.get(key, {}).get(INTEGRITY, 0),
                semantics_findings=by_category.get(key, {}).get("semantics", 0),
            )
            for name in ("batches", "bytes", "records", "timestamp_regressions"):
                row[name] = row[name] or 0
            keyed, distinct = stats.get("keyed_records") or 0, stats.get("distinct_keys") or 0
            row["shadowed_records"] = keyed - distinct
            row["shadowed_share"] = (keyed - distinct) / row["records"] if row["records"] else 0.0
            for outcome, column in _OUTCOME_COLUMNS.items():
                row[column] = outcomes.get(key, {}).get(outcome, 0)
            rows.append(row)
        return rows

    def summary_line(self) -> str:
        counts = self.check_counts()
        by_severity = {severity: 0 for severity in SEVERITIES}
        for check, count in counts.items():
            by_severity[CHECKS[check].severity] += count
        return "findings: " + ", ".join(f"{s} {n}" for s, n in by_severity.items())


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def summary(data: AuditData, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    counts = data.check_counts()
    severities = dict.fromkeys(SEVERITIES, 0)
    for check, count in counts.items():
        severities[CHECKS[check].severity] += count
    topics: dict[str, dict[str, Any]] = {}
    for row in partitions:
        policy = data.policies.get(row["topic"])
        topic = topics.setdefault(
            row["topic"],
            {
                "partitions": 0,
                "records": 0,
                "bytes": 0,
                "batches": 0,
                "integrity_findings": 0,
                "cleanup_policy": None if policy is None else ",".join(policy.policy),
                "compacted": None if policy is None else policy.compacted,
                "cleanup_policy_from": None if policy is None else policy.source,
            },
        )
        topic["partitions"] += 1
        for name in ("records", "bytes", "batches", "integrity_findings"):
            topic[name] += row[name] or 0
    outcomes = dict.fromkeys(OUTCOMES, 0)
    for per in data.outcome_counts().values():
        for outcome, count in per.items():
            outcomes[outcome] += count
    options = asdict(data.options)
    return {
        "log_dir": data.options.log_dir,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "status": "failed" if data.exit_status else "ok",
        "exit_status": data.exit_status,
        "errors": data.errors,
        "failed_checks": data.failed_checks(),
        "integrity_failures": data.integrity_failures,
        "findings_by_severity": severities,
        "checks": {
            name: {
                "category": check.category,
                "severity": check.severity,
                "count": counts[name],
                "description": check.description,
            }
            for name, check in CHECKS.items()
        },
        "totals": {
            "topics": len(topics),
            "partitions": len(partitions),
            "segments": sum(row["segments"] for row in partitions),
            "size_on_disk": sum(row["size_on_disk"] for row in partitions),
            "batches": sum(row["batches"] for row in partitions),
            "records": sum(row["records"] for row in partitions),
            "transactions": outcomes,
            "groups": len(data.coordinator["groups"]),
            "committed_offsets": len(data.coordinator["consumer_offsets"]),
            "transactional_ids": len(data.coordinator["transaction_state"]),
        },
        "topics": topics,
        "elapsed_seconds": round(data.elapsed_seconds, 3),
        "spark": data.spark,
        "options": {k: v for k, v in options.items() if k not in ("spark_conf",)},
    }


def write_report(data: AuditData, out_dir: Path) -> dict[str, Any]:
    from .page import render

    partitions = data.partition_rows()
    tables = {
        "findings": data.findings_table(),
        "partitions": _table(partitions, PARTITIONS_SCHEMA),
        "transactions": (
            data.transactions.cast(TRANSACTIONS_SCHEMA)
            if data.transactions is not None
            else TRANSACTIONS_SCHEMA.empty_table()
        ),
        "consumer_offsets": _table(data.coordinator["consumer_offsets"], CONSUMER_OFFSETS_SCHEMA),
        "groups": _table(data.coordinator["groups"], GROUPS_SCHEMA),
        "transaction_state": _table(
            data.coordinator["transaction_state"], TRANSACTION_STATE_SCHEMA
        ),
    }
    for name, table in tables.items():
        pq.write_table(table, out_dir / f"{name}.parquet")
    result = summary(data, partitions)
    result["files"] = ["summary.json", "report.html", *(f"{name}.parquet" for name in tables)]
    (out_dir / "report.html").write_text(render(data, result, tables), encoding="utf-8")
    (out_dir / "summary.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
