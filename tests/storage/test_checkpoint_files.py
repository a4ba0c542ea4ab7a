from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from brook.storage.checkpoints import (
    MetaProperties,
    OffsetCheckpointFile,
    parse_java_properties,
    read_meta_properties,
    read_partition_metadata,
    topic_id_from_string,
    topic_id_to_string,
    write_meta_properties,
    write_partition_metadata,
)
from brook.storage.errors import CorruptCheckpointError


def test_offset_checkpoint_round_trip_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    offsets = {("orders", 0): 120, ("orders", 1): 0, ("__consumer_offsets", 17): 9}
    checkpoint.write(offsets)
    assert path.read_text() == "0\n3\n__consumer_offsets 17 9\norders 0 120\norders 1 0\n"
    assert checkpoint.read() == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    checkpoint.write({})
    assert path.read_text() == "0\n0\n"


@pytest.mark.parametrize("text", ["", "0\n"])
def test_a_checkpoint_that_ends_before_its_count_is_empty_as_in_kafka(
    tmp_path: Path, text: str
) -> None:
    """Kafka creates its cleaner-offset-checkpoint as an empty file, and reads a file that
    ends before its version or count line as no entries (CheckpointReadBuffer)."""
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text(text)
    assert OffsetCheckpointFile(path).read() == {}


@pytest.mark.parametrize(
    "text",
    ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt zero 1\n", "1\n", "zero\n0\n"],
)
def test_malformed_checkpoints_are_reported(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_meta_properties(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None
    write_meta_properties(tmp_path, MetaProperties(0, 3, "abcDEF_-1234567890abcd"))
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#\n#")
    assert "version=0\nbroker.id=3\ncluster.id=abcDEF_-1234567890abcd\n" in text
    assert read_meta_properties(tmp_path) == MetaProperties(0, 3, "abcDEF_-1234567890abcd")


def test_meta_properties_written_by_kafka_kraft(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Jan 01 00:00:00 UTC 2024\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    )
    meta = read_meta_properties(tmp_path)
    assert meta is not None
    assert (meta.version, meta.broker_id, meta.cluster_id) == (1, 1, "MkU3OEVBNTcwNTJENDM2Qk")
    assert ("directory.id", "AAAAAAAAAAAAAAAAAAAAAA") in meta.extra


def test_java_properties_parsing() -> None:
    assert parse_java_properties("! c\n a = 1 \nb:2\nc\n") == {"a": "1", "b": "2", "c": ""}
    # java.util.Properties' rules: continuation lines (an odd number of backslashes),
    # escapes in keys and values, a whitespace separator.
    text = (
        'j=Module required \\\n    user="a" \\\n  pw="b";\n'
        "x\\=y = 1\nk\\ v w\nu=\\u0041\\tB\nd=c:\\\\\n"
    )
    assert parse_java_properties(text) == {
        "j": 'Module required user="a" pw="b";',
        "x=y": "1",
        "k v": "w",
        "u": "A\tB",
        "d": "c:\\",
    }


def test_topic_id_string_matches_kafka_uuid_to_string() -> None:
    # Kafka prints Uuid(mostSig, leastSig) as url-safe base64 of its 16 bytes, unpadded.
    topic_id = uuid.UUID("00000000-0000-0001-0000-000000000002")
    assert topic_id_to_string(topic_id) == "AAAAAAAAAAEAAAAAAAAAAg"
    random_id = uuid.uuid4()
    assert topic_id_from_string(topic_id_to_string(random_id)) == random_id
    assert len(topic_id_to_string(random_id)) == 22


def test_partition_metadata(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path) is None
    topic_id = uuid.UUID("00000000-0000-0001-0000-000000000002")
    write_partition_metadata(tmp_path, topic_id)
    assert (tmp_path / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg\n"
    )
    assert read_partition_metadata(tmp_path) == topic_id
    (tmp_path / "partition.metadata").write_text("version: 1\ntopic_id: x\n")
    with pytest.raises(CorruptCheckpointError):
        read_partition_metadata(tmp_path)
