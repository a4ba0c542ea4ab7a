"""Idempotent producers' state moves on only with what the log actually holds.

An append's sequence checks are prepared, and the producers' state takes them once the
batches are written (Kafka's prepareUpdate/update): a refused append, or one whose write
fails, leaves the state as it was, so the producer's retry lands at the right place.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import BASE_TS, append

from brook.protocol.errors import InvalidRecordError, KafkaStorageError, OutOfOrderSequenceError
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig

PRODUCER = 4242


def idempotent(sequence: int, count: int = 2, epoch: int = 0) -> bytearray:
    records = [Record(i, BASE_TS, None, b"v%d" % (sequence + i)) for i in range(count)]
    return bytearray(
        build_batch(records, producer_id=PRODUCER, producer_epoch=epoch, base_sequence=sequence)
    )


def last_sequence(log: Log) -> int:
    return log.producer_state.producers[PRODUCER].last_sequence


def test_a_refused_request_changes_no_producer_state(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    append(log, idempotent(0))
    # A batch with a gap, then two batches in one request (Kafka takes one per partition
    # from magic v2): nothing of either is kept.
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idempotent(9))
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        append(log, idempotent(2), idempotent(4))
    assert last_sequence(log) == 1
    assert log.log_end_offset == 2
    assert append(log, idempotent(2)).first_offset == 2
    assert last_sequence(log) == 3
    # A retry of what was written is answered with its first offsets.
    assert append(log, idempotent(2)).first_offset == 2
    log.close()


def test_a_failed_write_changes_no_producer_state(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    append(log, idempotent(0))
    # The segment's descriptor goes away behind the log's back: the next write fails.
    records = log.active_segment.log
    assert records._fd is not None
    os.close(records._fd)
    with pytest.raises(KafkaStorageError):
        append(log, idempotent(2))
    assert last_sequence(log) == 1, "the state moved on for a batch that was never written"
    records._fd = None
    log.close_handlers()
    # After a restart the state, rebuilt from the log, agrees: sequence 2 comes next.
    reopened = Log.open(partition_dir, LogConfig(), clean_shutdown=False)
    assert reopened.log_end_offset == 2
    assert last_sequence(reopened) == 1
    assert append(reopened, idempotent(2)).first_offset == 2
    reopened.close()
