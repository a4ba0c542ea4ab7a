"""The audit's options, and the command line that sets them (`brook audit` and
spark-submit share it)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

# Kafka's defaults for the KIP-937 bounds and for producer expiry.
LONG_MAX = 2**63 - 1
DEFAULT_BEFORE_MAX_MS = LONG_MAX  # log.message.timestamp.before.max.ms
DEFAULT_AFTER_MAX_MS = 3_600_000  # log.message.timestamp.after.max.ms
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_FINDINGS = 100
DEFAULT_TIME_BUCKETS = 60

EPILOG = """\
checks:
  integrity  CRC, torn tails, unreadable bytes, offsets overlapping or going backwards,
             .index/.timeindex entries, leader-epoch-checkpoint, .snapshot, .txnindex,
             offsets missing in a topic that is not compacted (by its cleanup.policy)
  semantics  timestamp regressions and KIP-937 bounds, duplicate batches, sequence gaps,
             transactions (committed, aborted, open, markers without data), offset gaps
  statistics records, bytes, batches, compression, offset and time ranges, keys, and
             the share of records shadowed by a later record with the same key
  __consumer_offsets and __transaction_state decoded into groups, committed offsets
  and transaction states

outputs in REPORT_DIR: summary.json, report.html, findings.parquet, partitions.parquet,
  transactions.parquet, consumer_offsets.parquet, groups.parquet, transaction_state.parquet

exit status: 0 when no check of severity error finds anything, 1 when one does (data
damaged or lost: every integrity check, duplicate batches, sequence gaps, COMMIT
markers without their data), 2 for bad arguments or a LOG_DIR that cannot be read.

example:
  brook audit /var/lib/kafka/data --out /tmp/audit --master spark://10.0.0.5:7077
"""


@dataclass
class AuditOptions:
    log_dir: str
    out_dir: str
    topics: list[str] | None = None
    max_findings: int = DEFAULT_MAX_FINDINGS
    before_max_ms: int = DEFAULT_BEFORE_MAX_MS
    after_max_ms: int = DEFAULT_AFTER_MAX_MS
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    time_buckets: int = DEFAULT_TIME_BUCKETS
    # A JSON file of topic configs ({"topic": {"cleanup.policy": "compact"}}) over the log
    # dir's own: for a log dir whose topic configs live elsewhere (Kafka's).
    topic_configs: str | None = None
    # How to reach Spark when the audit starts its own session.
    master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)


def _topics(text: str) -> list[str]:
    topics = [item.strip() for item in text.split(",") if item.strip()]
    if not topics:
        raise argparse.ArgumentTypeError("give topic names separated by commas")
    return topics


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log_dir", metavar="LOG_DIR", help="a log dir (or partition dir, or glob)")
    parser.add_argument("--out", required=True, metavar="REPORT_DIR", help="where the report goes")
    parser.add_argument(
        "--master",
        metavar="URL",
        help="Spark master (local[*], spark://HOST:PORT, ...); default local[*], or"
        " spark-submit's when run by it",
    )
    parser.add_argument(
        "--topics",
        type=_topics,
        metavar="TOPIC[,TOPIC...]",
        help="audit only these topics (default: every topic, internal ones included)",
    )
    parser.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark config for the session the audit starts (repeatable)",
    )
    parser.add_argument(
        "--max-findings",
        type=_positive,
        default=DEFAULT_MAX_FINDINGS,
        metavar="N",
        help=f"rows kept per check and partition (default {DEFAULT_MAX_FINDINGS}; counts are"
        " exact)",
    )
    parser.add_argument(
        "--timestamp-before-max-ms",
        type=_non_negative,
        default=DEFAULT_BEFORE_MAX_MS,
        metavar="MS",
        help="log.message.timestamp.before.max.ms to judge timestamps by (Kafka's default:"
        " no bound)",
    )
    parser.add_argument(
        "--timestamp-after-max-ms",
        type=_non_negative,
        default=DEFAULT_AFTER_MAX_MS,
        metavar="MS",
        help=f"log.message.timestamp.after.max.ms (default {DEFAULT_AFTER_MAX_MS})",
    )
    parser.add_argument(
        "--topic-configs",
        metavar="FILE",
        help="the topics' configs as JSON {topic: {key: value}}, for their cleanup.policy"
        " (default: the log dir's brook-topic-configs.json; give it for a log dir Apache"
        " Kafka wrote, whose topic configs live in its metadata)",
    )
    parser.add_argument(
        "--producer-id-expiration-ms",
        type=_positive,
        default=DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        metavar="MS",
        help="producer.id.expiration.ms: a producer idle this long may be missing from a"
        f" snapshot (default {DEFAULT_PRODUCER_ID_EXPIRATION_MS})",
    )


def from_args(args: argparse.Namespace) -> AuditOptions:
    return AuditOptions(
        log_dir=args.log_dir,
        out_dir=args.out,
        topics=args.topics,
        max_findings=args.max_findings,
        before_max_ms=args.timestamp_before_max_ms,
        after_max_ms=args.timestamp_after_max_ms,
        producer_id_expiration_ms=args.producer_id_expiration_ms,
        topic_configs=args.topic_configs,
        master=args.master,
        spark_conf=dict(args.conf),
    )


def build_parser(prog: str = "brook audit") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Audit a log dir in Kafka's on-disk format with Spark: integrity,"
        " semantics, statistics and the coordinators' topics, into a report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return parser
