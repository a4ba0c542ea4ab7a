"""Observability: the counters the hot paths keep, /metrics (Prometheus), /v1/health and
/v1/ready on the admin endpoint, the event loop's lag, and the JSON log format.

The hot paths only add to plain ints (partition_stats.py, request_metrics.py); the
Prometheus client library is imported by collector.py alone, when admin.listener is set.
"""
