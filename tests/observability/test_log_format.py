"""log.format: text lines (the default), or one JSON object per line for log shippers,
whose lines about a client's request carry its client id and peer."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from brook.broker.testing import BrokerProcess
from brook.protocol.record_batch import Record, build_batch
from tests.integration.clients import create_topic
from tests.integration.processes import run_brook
from tests.integration.raw_client import RawClient, produce_request

# Time to the millisecond, level, logger, message.
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) brook[\w.]*: .+$"
)


def _rejected_produce(port: int, topic: str) -> None:
    """A batch from two hours ahead: INVALID_TIMESTAMP, and a warning naming the client."""
    future = int(time.time() * 1000) + 2 * 3600 * 1000
    with RawClient(port, client_id="late-clock") as client:
        response = client.request(
            produce_request(topic, 0, build_batch([Record(0, future, None, b"v")]))
        )
    assert (
        response.responses[0].partition_responses[0].error_code.name
        == ("unknown_topic_or_partition")
        or response.responses[0].partition_responses[0].error_code.name == "invalid_timestamp"
    )


def test_text_lines_carry_time_level_logger_and_name_the_client(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "texts")
        _rejected_produce(broker.port, "texts")
        broker.wait_for_log("Rejected produce")
    finally:
        assert broker.stop() == 0
    log = broker.log_text()
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines and all(TEXT_LINE.match(line) for line in lines), [
        line for line in lines if not TEXT_LINE.match(line)
    ]
    rejected = next(line for line in lines if "Rejected produce" in line)
    assert " WARNING brook.apis.produce: Rejected produce to texts-0 from " in rejected
    assert "(client 'late-clock')" in rejected and "127.0.0.1:" in rejected


def test_json_lines_carry_the_client_of_the_request(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data", {"log.format": "json"}).start()
    try:
        create_topic(broker.bootstrap, "jsons")
        _rejected_produce(broker.port, "jsons")
        broker.wait_for_log("Rejected produce")
    finally:
        assert broker.stop() == 0
    log = broker.log_text()
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]
    for line in lines:
        assert {"timestamp", "level", "logger", "message"} <= set(line), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["timestamp"])
    rejected = next(line for line in lines if line["message"].startswith("Rejected produce"))
    assert rejected["level"] == "WARNING" and rejected["logger"] == "brook.apis.produce"
    assert rejected["client_id"] == "late-clock"
    assert rejected["peer"].startswith("127.0.0.1:")
    # A line about no request names no client.
    started = next(line for line in lines if "listening on" in line["message"])
    assert "client_id" not in started and "peer" not in started
    assert lines[-1]["message"] == "Broker 0 stopped cleanly"


def test_an_unknown_log_format_stops_start_up_naming_the_key():
    finished = run_brook(["serve", "--override", "log.format=xml"])
    assert finished.returncode == 2
    assert "log.format" in finished.output and "xml" in finished.output
    assert "text, json" in finished.output
