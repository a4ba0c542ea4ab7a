from __future__ import annotations

import pytest

from brook.storage import LogConfig
from brook.storage.log_config import LONG_MAX


def test_kafka_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.index_interval_bytes == 4096
    assert config.max_index_size == 10485760
    assert config.flush_messages == config.flush_ms == LONG_MAX
    assert config.retention_ms == 604800000 and config.retention_bytes == -1
    assert config.message_timestamp_type == "CreateTime"
    assert config.message_timestamp_after_max_ms == 3600000
    assert config.delete_enabled and not config.compact


def test_from_topic_configs() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "retention.ms": -1,
            "cleanup.policy": "compact,delete",
            "message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "true",
            "min.cleanable.dirty.ratio": "0.1",
            "segment.index.bytes": 4096,
            "some.unknown.config": "x",
        }
    )
    assert config.segment_bytes == 1048576
    assert config.retention_ms == -1
    assert config.cleanup_policy == ("compact", "delete") and config.compact
    assert config.log_append_time
    assert config.unclean_leader_election_enable is True
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.max_index_size == 4096
    with pytest.raises(ValueError, match=r"segment\.ms"):
        LogConfig.from_properties({"segment.ms": "soon"})
    base = LogConfig(retention_bytes=5)
    assert LogConfig.from_properties({"flush.ms": "10"}, base).retention_bytes == 5


def test_jitter_stays_below_segment_ms() -> None:
    config = LogConfig(segment_ms=100, segment_jitter_ms=1000)
    assert all(0 <= config.random_segment_jitter() < 100 for _ in range(50))
    assert LogConfig().random_segment_jitter() == 0
