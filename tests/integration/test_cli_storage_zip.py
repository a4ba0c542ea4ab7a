"""`brook storage-zip`: a zip for Spark's --py-files that reads segments on its own.

The zip is imported in a fresh interpreter whose path holds only the zip and the
third-party packages it names (installed elsewhere, linked in here), never Brook's own
installation: it must read a partition Brook wrote and load nothing of the broker."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig

from .cli import assert_one_line_error, brook

READ_WITH_ZIP = r"""
import json, sys
sys.path[:0] = sys.argv[1:3]
from brook.storage.reader import SegmentReader, list_partitions
import brook.storage

values = []
for partition in list_partitions(sys.argv[3]):
    for segment in partition.segments:
        with SegmentReader(segment.log_path) as reader:
            values += [record.value.decode() for record in reader.records()]
print(json.dumps({
    "values": values,
    "storage_from": brook.storage.__file__,
    # No part of the broker; asyncio only as kio's (kio.serial, whose readers decode
    # the records, names asyncio.StreamWriter in a type alias).
    "loaded": sorted(m for m in sys.modules if m.startswith("brook.broker")),
    "asyncio_without_kio": "asyncio" in sys.modules and "kio.serial" not in sys.modules,
}))
"""


def requirement_names(distribution: str) -> list[str]:
    """The distributions `distribution` needs, without extras (what pip would install)."""
    names = []
    for requirement in importlib.metadata.requires(distribution) or []:
        if ";" not in requirement:
            names.append(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))  # type: ignore[union-attr]
    return names


def link_installed(names: list[str], target: Path) -> None:
    """Link each distribution (and what it needs) from this environment into `target`:
    its top-level modules and its metadata, as `pip install --target` would lay them."""
    target.mkdir()
    pending, seen = list(names), set()
    while pending:
        name = pending.pop()
        distribution = importlib.metadata.distribution(name)
        if distribution.metadata["Name"].lower() in seen:
            continue
        seen.add(distribution.metadata["Name"].lower())
        pending += requirement_names(name)
        for file in distribution.files or []:
            top = file.parts[0]
            source = Path(distribution.locate_file(top))
            if top not in ("..", "bin") and not (target / top).exists() and source.exists():
                (target / top).symlink_to(source)


def test_the_zip_reads_segments_without_the_broker(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "data" / "orders-0", LogConfig(segment_bytes=1024))
    expected = []
    for n in range(40):
        value = f"value {n}".ljust(40, ".")
        batch = bytearray(build_batch([Record(0, 1_700_000_000_000, b"k", value.encode())]))
        log.append_as_leader(batch, 0, 1_700_000_000_000)
        expected.append(value)
    assert len(log.segments) > 1
    log.close()

    out = tmp_path / "brook-storage.zip"
    ran = brook("storage-zip", str(out))
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert ran.lines[0].startswith(f"Wrote {out} (")
    assert (
        ran.lines[1]
        == "On the executors: pip install 'kio<0.7,>=0.6.5' 'crc32c>=2.4' 'cramjam>=2.8'"
    )
    names = zipfile.ZipFile(out).namelist()
    assert {
        "brook/__init__.py",
        "brook/storage/reader.py",
        "brook/protocol/record_batch.py",
    } <= set(names)
    assert not [
        name
        for name in names
        if not name.startswith(("brook/storage/", "brook/protocol/", "brook/__init__"))
    ]

    deps = tmp_path / "deps"
    link_installed(["kio", "crc32c", "cramjam"], deps)
    # -S: no site-packages (where Brook itself is installed), -E: no PYTHON* variables.
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-E",
            "-c",
            READ_WITH_ZIP,
            str(out),
            str(deps),
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["storage_from"] == str(out / "brook" / "storage" / "__init__.py")
    assert result["values"] == expected
    assert result["loaded"] == []
    assert result["asyncio_without_kio"] is False


def test_bad_destinations_are_one_error_line(tmp_path: Path) -> None:
    assert_one_line_error(brook("storage-zip", str(tmp_path)), "is a directory", code=2)
    missing = tmp_path / "no" / "such" / "dir" / "out.zip"
    assert_one_line_error(brook("storage-zip", str(missing)), str(missing), code=1)
    assert not missing.parent.exists()
