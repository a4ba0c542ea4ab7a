"""`brook storage-zip`: the storage reader as one zip for Spark's `--py-files`.

A Spark executor needs to read segments, not to run a broker: the zip holds the
brook.protocol and brook.storage packages only (their .py files, taken from wherever
Brook is installed), which import nothing of the broker, asyncio or a Kafka client.
Their third-party dependencies carry native code, which Python cannot import from a
zip, so they are installed on the executors instead; the command prints the line.

    brook storage-zip /tmp/brook-storage.zip
    spark-submit --py-files /tmp/brook-storage.zip job.py
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import brook.protocol
import brook.storage

PACKAGES = (brook.protocol, brook.storage)
DISTRIBUTION = "brook-broker"
# What brook.protocol and brook.storage import outside the standard library.
DEPENDENCIES = ("kio", "crc32c", "cramjam")
DEFAULT_OUT = Path("brook-storage.zip")

# Python cannot import a namespace package from a zip, so `brook` gets an __init__.py
# there; extend_path keeps other installed `brook.*` packages importable beside it.
ROOT_INIT = '''"""Brook's storage reader, packed by `brook storage-zip` for Spark's --py-files."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
'''


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "storage-zip",
        help="pack brook.protocol and brook.storage into a zip for Spark's --py-files",
        description="Write brook.protocol and brook.storage (the read-only segment reader\n"
        "and the formats) into one zip that Spark's --py-files, or sys.path, takes.\n"
        "Their dependencies (kio, crc32c, cramjam) contain native code and must be\n"
        "installed on the executors; the command prints the pip line.",
        epilog="example:\n  brook storage-zip /tmp/brook-storage.zip\n"
        "  spark-submit --py-files /tmp/brook-storage.zip job.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=DEFAULT_OUT,
        metavar="ZIP",
        help=f"where to write the zip (default {DEFAULT_OUT})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.is_dir():
        print(f"brook storage-zip: error: {out} is a directory", file=sys.stderr)
        return 2
    try:
        count = build_zip(out)
    except OSError as exc:
        print(f"brook storage-zip: error: {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"Wrote {out} ({count} modules of {', '.join(p.__name__ for p in PACKAGES)})")
    print(f"On the executors: pip install {' '.join(dependency_specs())}")
    return 0


def build_zip(out: Path) -> int:
    """Write the zip (replacing `out` only once complete); returns the number of modules."""
    tmp = out.with_name(out.name + ".tmp")
    count = 0
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("brook/__init__.py", ROOT_INIT)
        for package in PACKAGES:
            source = Path(next(iter(package.__path__)))
            prefix = package.__name__.replace(".", "/")
            for path in sorted(source.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                archive.write(path, f"{prefix}/{path.relative_to(source).as_posix()}")
                count += 1
    tmp.replace(out)
    return count


def dependency_specs() -> list[str]:
    """The pins Brook's own distribution puts on the dependencies, quoted for a shell."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    pinned = {}
    for requirement in requires:
        if ";" in requirement:  # an extra's requirement, not the package's own
            continue
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(.*)", requirement)
        if match and match.group(1).lower() in DEPENDENCIES:
            pinned[match.group(1).lower()] = match.group(2).replace(" ", "")
    specs = [f"{name}{pinned.get(name, '')}" for name in DEPENDENCIES]
    return [f"'{spec}'" if set(spec) & set("<>=,") else spec for spec in specs]
