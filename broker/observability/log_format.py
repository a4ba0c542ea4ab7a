"""The broker's log lines: text (the default) or one JSON object per line
(`log.format=json`) for log shippers (Fluent Bit, Vector, Loki's promtail...).

Text is what Brook has always written, the fields of Kafka's log4j lines (time to the
millisecond, level, logger, message) with the logger before the message, where tools and
tests that read Brook's log expect it:

    2026-11-24 12:31:14,123 WARNING brook.apis.produce: Rejected produce to t-0 from ...

JSON carries the same line as fields, and, for a line logged while a request's handler
runs, the client id and peer of that request (the connection sets `current_request`
around each handler call; a line logged later, from a timer or another task, is no
longer about that request and gets neither):

    {"timestamp": "2026-11-24T12:31:14.123Z", "level": "WARNING", "logger": "brook.apis.produce",
     "message": "Rejected produce ...", "client_id": "rdkafka", "peer": "127.0.0.1:50312"}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RequestContext:
    """The request whose handler is running on the loop (its RequestContext), if any."""

    __slots__ = ("request",)

    def __init__(self) -> None:
        self.request: Any = None


current_request = _RequestContext()


class RequestFields(logging.Filter):
    """Adds the running request's client_id and peer to each record (if there is one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = current_request.request
        if request is not None and not hasattr(record, "peer"):
            record.client_id = request.client_id
            record.peer = request.peer
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line: dict[str, Any] = {
            "timestamp": f"{seconds}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("client_id", "peer"):
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.threadName and record.threadName != "MainThread":
            line["thread"] = record.threadName
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        import json  # only a JSON log needs it (imported once, then cached)

        return json.dumps(line, ensure_ascii=False, default=str)


def formatter_for(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(level: str, log_format: str = "text") -> None:
    """The root logger's handler (stderr) in this format, with request fields."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    root.setLevel(level)
    for handler in root.handlers:
        handler.setFormatter(formatter_for(log_format))
        if not any(isinstance(f, RequestFields) for f in handler.filters):
            handler.addFilter(RequestFields())


def first_and_count(names: Sequence[str], shown: int = 10) -> str:
    """The first `shown` of `names` and how many more: a line about thousands of
    partitions (a leadership change, a big topic) names a few and counts the rest."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" (and {more} more)" if more > 0 else "")
