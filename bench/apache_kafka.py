"""Apache Kafka as a peer: its jars, its tools, and (for the bench and the tests) a broker.

The jars are Maven Central's, listed by jvm/pom.xml and copied by
`mvn dependency:copy-dependencies` into a cache the tests and the bench share
(`$XDG_CACHE_HOME/brook/apache-kafka-<version>`, ~/.cache by default; BROOK_KAFKA_CACHE
names another). The first caller fetches them (about a minute, 94 jars); the others wait
on a file lock and reuse them. Nothing here is a product dependency: only tests and the
bench run Kafka.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "jvm" / "pom.xml"
# Kafka's tools log WARN and above to stderr, the way its scripts' tools-log4j2 does.
TOOLS_LOG4J2 = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""
FETCH_TIMEOUT_S = 900


def kafka_version() -> str:
    """The Apache Kafka release jvm/pom.xml names."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    assert found is not None, f"{POM} names no kafka.version"
    return found.group(1)


def cache_dir() -> Path:
    configured = os.environ.get("BROOK_KAFKA_CACHE")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "brook" / f"apache-kafka-{kafka_version()}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def kafka_jars() -> Path:
    """The directory of Kafka's jars, fetched on first use (Maven and its own cache,
    ~/.m2, do the downloading); raises RuntimeError with Maven's output if it fails."""
    home = cache_dir()
    libs = home / "libs"
    done = home / "fetched"
    if done.exists():
        return libs
    with _locked(home.with_name(home.name + ".lock")):
        if done.exists():  # another process fetched them while this one waited
            return libs
        if shutil.which("mvn") is None:
            raise RuntimeError("Apache Kafka's jars are fetched with Maven: mvn is not on PATH")
        staging = home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        fetched = subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
            ],
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
            check=False,
        )
        if fetched.returncode != 0:
            raise RuntimeError(
                f"fetching Apache Kafka {kafka_version()} with Maven failed:\n"
                f"{fetched.stdout[-3000:]}{fetched.stderr[-3000:]}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        (home / "tools-log4j2.properties").write_text(TOOLS_LOG4J2)
        done.write_text(kafka_version() + "\n")
    return libs


def java_command(main_class: str, *args: str, heap: str = "256m") -> list[str]:
    """A JVM running one of Kafka's main classes over the cached jars; C1 only and the
    serial collector, as a short-lived tool wants (start-up over peak speed)."""
    libs = kafka_jars()
    return [
        "java",
        f"-Xmx{heap}",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-Dlog4j2.configurationFile={libs.parent / 'tools-log4j2.properties'}",
        "-cp",
        f"{libs}/*",
        main_class,
        *args,
    ]


def run_tool(main_class: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, run to its end; its output as text."""
    return subprocess.run(
        java_command(main_class, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=java_env(),
    )


def java_env() -> dict[str, str]:
    """The environment without JAVA_TOOL_OPTIONS: java_command sets its flags itself, and
    a JVM that picks the variable up says so on stderr, among the tool's own messages."""
    return {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}


def dump_log_segments(files: list[Path], *options: str) -> subprocess.CompletedProcess[str]:
    """Kafka's DumpLogSegments (kafka-dump-log.sh) over `files`, in one JVM."""
    return run_tool(
        "org.apache.kafka.tools.DumpLogSegments",
        "--files",
        ",".join(str(f) for f in files),
        *options,
    )
