"""The audit of a log dir in Kafka's on-disk format, as a Spark job.

    brook audit LOG_DIR --out REPORT_DIR [--master URL] [--topics T1,T2]

or, from Python, on a session of your own:

    from brook.spark.audit import AuditOptions, run_audit
    data = run_audit(spark, AuditOptions(log_dir="/var/lib/kafka", out_dir="/tmp/audit"))
    data.exit_status  # 1 when a check of severity error found something

One module per concern: integrity.py (the batches), partition_files.py (indexes, leader
epochs, snapshots, txn indexes: one Spark task per partition directory), semantics.py
(timestamps, producers, transactions, offset gaps, judged by each topic's policy from
cleanup_policies.py), stats.py, internal_topics.py
(`__consumer_offsets`, `__transaction_state`), report.py and page.py (the outputs),
job.py (the stages and the command line).
"""

from __future__ import annotations

from .job import main, run_audit
from .options import AuditOptions
from .report import AuditData

__all__ = ["AuditData", "AuditOptions", "main", "run_audit"]
