"""The small text files Kafka keeps beside its logs, in Kafka's exact formats.

- Checkpoint files (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
  `replication-offset-checkpoint`, and per partition `leader-epoch-checkpoint`): a
  version line ("0"), a line with the entry count, then one entry per line.
- `meta.properties` in each log dir: Java properties naming the broker and cluster.
- `partition.metadata` in each partition dir: the topic id.

Every write goes to `<name>.tmp`, is fsynced, renamed over the real file and the
directory fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from .deferred_fsync import defer, deferring
from .errors import CorruptCheckpointError
from .log_file_utils import PARTITION_METADATA_FILE, fsync_dir

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"

T = TypeVar("T")


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a crash leaves the old or the new content."""
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json(path: Path) -> Any:
    """A JSON state file the broker keeps beside its logs (None when there is none); a
    damaged one raises CorruptCheckpointError naming the file, not a parser's traceback."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    import json  # only a broker with state files parses JSON: not at an empty start

    try:
        return json.loads(text)
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path} is damaged: not valid JSON ({exc})") from None


def write_json(path: Path, value: Any, pretty: bool = False) -> None:
    """Replace a JSON state file atomically (read back by read_json)."""
    import json

    text = json.dumps(value, indent=1, sort_keys=True) if pretty else json.dumps(value)
    atomic_write_text(path, text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through `<name>.tmp`, fsynced and renamed, the directory
    fsynced after: a crash leaves the old or the new content, never a torn file. Within
    deferring_fsyncs() (a new partition's files) the fsyncs wait for sync_deferred."""
    deferred = deferring()
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if not deferred:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if deferred:
        defer(path, path.parent)
    else:
        fsync_dir(path.parent)


class CheckpointFile(Generic[T]):
    """Kafka's versioned checkpoint file: version, count, then one formatted entry a line."""

    def __init__(
        self,
        path: Path,
        version: int,
        to_line: Callable[[T], str],
        from_line: Callable[[str], T],
    ) -> None:
        self.path = path
        self.version = version
        self._to_line = to_line
        self._from_line = from_line

    def write(self, entries: Iterable[T]) -> None:
        lines = [self._to_line(entry) for entry in entries]
        body = "".join(f"{line}\n" for line in lines)
        atomic_write_text(self.path, f"{self.version}\n{len(lines)}\n{body}")

    def read(self) -> list[T]:
        """The entries, or [] when the file does not exist or is empty."""
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        # As Kafka's CheckpointReadBuffer: a file that ends before its version line, or
        # right after it, holds no entries (Kafka creates its cleaner checkpoint empty).
        if not lines:
            return []
        try:
            version = int(lines[0].strip())
            count = int(lines[1].strip()) if len(lines) > 1 else 0
        except ValueError as exc:
            raise CorruptCheckpointError(f"{self.path} has a malformed header: {exc}") from None
        if version != self.version:
            raise CorruptCheckpointError(
                f"{self.path} has version {version}; only version {self.version} is understood"
            )
        body = [line for line in lines[2:] if line.strip()]
        if len(body) != count:
            raise CorruptCheckpointError(
                f"{self.path} promises {count} entries but holds {len(body)}"
            )
        entries: list[T] = []
        for line in body:
            try:
                entries.append(self._from_line(line))
            except (ValueError, IndexError):
                raise CorruptCheckpointError(f"malformed line {line!r} in {self.path}") from None
        return entries


def _offset_line(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_offset_line(line: str) -> tuple[tuple[str, int], int]:
    topic, partition, offset = line.split()
    return (topic, int(partition)), int(offset)


class OffsetCheckpointFile:
    """A per-log-dir map (topic, partition) -> offset, e.g. recovery points."""

    VERSION = 0

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, self.VERSION, _offset_line, _parse_offset_line
        )

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())


# --- meta.properties ------------------------------------------------------------------


class MetaProperties(NamedTuple):
    """What a log dir says about its owner.

    Version 0 is a ZooKeeper-mode broker (`broker.id`), version 1 a KRaft node
    (`node.id`); Brook writes version 0 and reads both.
    """

    version: int
    broker_id: int | None
    cluster_id: str | None
    extra: tuple[tuple[str, str], ...] = ()

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.broker_id is not None:
            props["node.id" if self.version == 1 else "broker.id"] = str(self.broker_id)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        props.update(self.extra)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetaProperties:
        try:
            version = int(props.get("version", "0"))
            raw_id = props.get("broker.id", props.get("node.id"))
            broker_id = int(raw_id) if raw_id is not None else None
        except ValueError as exc:
            raise CorruptCheckpointError(f"meta.properties has a malformed value: {exc}") from None
        known = {"version", "broker.id", "node.id", "cluster.id"}
        extra = tuple(sorted((k, v) for k, v in props.items() if k not in known))
        return cls(version, broker_id, props.get("cluster.id"), extra)


def parse_java_properties(text: str) -> dict[str, str]:
    """A .properties file as java.util.Properties.load reads it (Kafka's server.properties,
    a client's --command-config, meta.properties): `#` and `!` comment lines; a line that
    ends in an odd number of backslashes goes on in the next (its leading whitespace
    dropped), as a `sasl.jaas.config` split over lines; the key ends at the first
    unescaped `=`, `:` or whitespace; `\\t`, `\\n`, `\\uXXXX` and `\\<char>` escapes.
    Values are trimmed, as Kafka's ConfigDef trims what it parses."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _key_and_value(line)
        props[_unescape(key)] = _unescape(value).strip()
    return props


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip()
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _key_and_value(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=:" or char.isspace():
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip()
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip()
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u" and len(text) >= index + 6:
            try:
                out.append(chr(int(text[index + 2 : index + 6], 16)))
                index += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    path = log_dir / META_PROPERTIES_FILE
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    return MetaProperties.from_properties(parse_java_properties(text))


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    # Java's Properties.store writes a comment line and a date line first; Kafka's
    # readers skip both, and so do ours.
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = "".join(f"{key}={value}\n" for key, value in meta.to_properties().items())
    atomic_write_text(log_dir / META_PROPERTIES_FILE, f"#\n#{stamp}\n{body}")


# --- partition.metadata ---------------------------------------------------------------


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_string(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a 16-byte topic id")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    atomic_write_text(
        partition_dir / PARTITION_METADATA_FILE,
        f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n",
    )


def read_partition_metadata(partition_dir: Path) -> uuid.UUID | None:
    """The topic id stored in a partition dir, or None when there is no file."""
    path = partition_dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    if not text.strip():
        # Written, but its fsync deferred and the machine down before the disk had it: the
        # topic id comes again from the metadata (deferred_fsync.py).
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CorruptCheckpointError(f"malformed line {line!r} in {path}")
        fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        raise CorruptCheckpointError(f"{path} has version {fields.get('version')!r}, expected 0")
    try:
        return topic_id_from_string(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path} has no valid topic_id: {exc}") from None
