"""Class data sharing (CDS) for the short-lived JVMs of the tests: Kafka's tools, above all.

A JVM spends most of a short run loading and verifying classes: Kafka's TopicCommand
against a live broker costs about 1.8 CPU-s, of which an archive of the classes a
previous run loaded (JDK 13+'s dynamic AppCDS archive) saves about half. Java 17 cannot
make one by itself on first use (-XX:+AutoCreateSharedArchive is JDK 19), so:

- the first JVM of a classpath that finds no archive, and can take its lock, runs with
  -XX:ArchiveClassesAtExit into a temporary file, which `Archive.publish` checks (a JVM
  started on it with -Xshare:on must come up) and renames into place once it has exited;
- every later JVM of that classpath runs with -XX:SharedArchiveFile; one that cannot use
  it (its jars changed since) loads its classes as before, silently (-Xlog off for cds).

A half-written archive is never used (a JVM mapping a truncated one crashes): only a
checked one is renamed into place. The archive is named by a digest of the JVM's version
and the classpath's jars (names, sizes, times), so new jars get a new archive.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# A JVM that cannot map the archive (a classpath that changed) says so on stderr, among
# the tool's own output: the tests read that output, so sharing stays silent.
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


@functools.cache
def _java_version() -> str:
    shown = subprocess.run(
        ["java", "-Xshare:auto", "-version"], capture_output=True, text=True, check=False
    )
    return shown.stderr


def _classpath_digest(classpath: str) -> str:
    """The JVM's version and each classpath entry's files (a `dir/*` entry: its jars)."""
    digest = hashlib.sha256(_java_version().encode())
    for entry in classpath.split(":"):
        paths = sorted(Path(entry[:-2]).glob("*.jar")) if entry.endswith("/*") else [Path(entry)]
        for path in paths:
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


@dataclass
class Archive:
    """The sharing flags of one JVM; `publish` after it exits (a no-op unless it dumped)."""

    flags: list[str]
    classpath: str
    _dumping: Path | None = None
    _target: Path | None = None
    _lock: IO[str] | None = None

    def publish(self, returncode: int | None) -> None:
        """Put the archive this JVM dumped in place if it exited well and the archive
        maps; release the dump's lock either way."""
        dumped, target = self._dumping, self._target
        self._dumping = None
        try:
            if dumped is None or target is None or returncode != 0 or not dumped.exists():
                return
            mapped = ["-Xshare:on", f"-XX:SharedArchiveFile={dumped}", *QUIET]
            check = subprocess.run(
                ["java", *mapped, "-cp", self.classpath, "-version"],
                capture_output=True,
                check=False,
                env=_without_tool_options(),
            )
            if check.returncode == 0:
                os.replace(dumped, target)
        finally:
            if dumped is not None:
                dumped.unlink(missing_ok=True)
            if self._lock is not None:
                self._lock.close()  # releases the flock
                self._lock = None


def _without_tool_options() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}


def archive_for(directory: Path, kind: str, classpath: str, dump: bool = True) -> Archive:
    """How a JVM of `classpath` shares classes: through the archive of `kind` in
    `directory` if there is one; else, with `dump`, it dumps one (if no other JVM is
    dumping it)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{kind}-{_classpath_digest(classpath)}.jsa"
    if target.exists():
        return Archive([f"-XX:SharedArchiveFile={target}", *QUIET], classpath)
    if not dump:
        return Archive([], classpath)
    lock = open(directory / f"{target.name}.lock", "w")  # noqa: SIM115  # held past return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return Archive([], classpath)  # another JVM is making it: this one goes without
    if target.exists():  # made while this process waited for the lock
        lock.close()
        return Archive([f"-XX:SharedArchiveFile={target}", *QUIET], classpath)
    dumping = directory / f"{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    flags = [f"-XX:ArchiveClassesAtExit={dumping}", *QUIET]
    return Archive(flags, classpath, dumping, target, lock)
