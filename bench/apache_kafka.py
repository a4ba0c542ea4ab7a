"""Apache Kafka as a peer: its jars, its tools, and (for the bench and the tests) a broker.

The jars are Maven Central's, listed by jvm/pom.xml and copied by
`mvn dependency:copy-dependencies` into a cache the tests and the bench share
(`$XDG_CACHE_HOME/brook/apache-kafka-<version>`, ~/.cache by default; BROOK_KAFKA_CACHE
names another). The first caller fetches them (about a minute, 94 jars); the others wait
on a file lock and reuse them. Spark's Kafka connector (jvm/spark-kafka/pom.xml) is fetched
the same way, for the PySpark tests. Nothing here is a product dependency: only tests and
the bench run them.
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

from bench import class_data

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "jvm" / "pom.xml"
# Kafka 3.9, the last release with ZooKeeper (a peer for a Brook cluster's log dirs).
ZOOKEEPER_KAFKA_POM = ROOT / "jvm" / "kafka-3.9" / "pom.xml"
# Spark's Kafka source and sink (spark-sql-kafka-0-10), for the PySpark tests.
SPARK_KAFKA_POM = ROOT / "jvm" / "spark-kafka" / "pom.xml"
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


def kafka_version(pom: Path = POM) -> str:
    """The Apache Kafka release a pom names (jvm/pom.xml's by default)."""
    return _property(pom, "kafka.version")


def spark_version(pom: Path = SPARK_KAFKA_POM) -> str:
    """The Spark release whose Kafka connector jvm/spark-kafka/pom.xml names."""
    return _property(pom, "spark.version")


def _property(pom: Path, name: str) -> str:
    found = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    assert found is not None, f"{pom} names no {name}"
    return found.group(1)


def cache_dir(pom: Path = POM) -> Path:
    """Where a pom's jars are kept: BROOK_KAFKA_CACHE for jvm/pom.xml's (a directory of
    that release's own otherwise), beside it for another pom's."""
    configured = os.environ.get("BROOK_KAFKA_CACHE")
    if pom == SPARK_KAFKA_POM:
        name = f"spark-sql-kafka-{spark_version(pom)}"
    else:
        name = f"apache-kafka-{kafka_version(pom)}"
    if configured:
        return Path(configured) if pom == POM else Path(configured).with_name(name)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "brook" / name


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock(2) on `path` (made where missing) for the block: one of several
    processes (xdist workers, say) does the work the block guards, the rest wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def kafka_jars(pom: Path = POM) -> Path:
    """The directory of the jars a pom lists (jvm/pom.xml: Kafka 4), fetched on first use
    (Maven and its own cache, ~/.m2, do the downloading); raises RuntimeError with Maven's
    output if it fails."""
    home = cache_dir(pom)
    libs = _fetched(pom, home, f"Apache Kafka {kafka_version(pom)}")
    log4j2 = home / "tools-log4j2.properties"
    if not log4j2.exists():
        log4j2.write_text(TOOLS_LOG4J2)
    return libs


def spark_kafka_jars() -> list[Path]:
    """Spark's Kafka source and sink with what they need beside a PySpark install
    (jvm/spark-kafka/pom.xml), for `spark.jars`; fetched on first use as kafka_jars'."""
    home = cache_dir(SPARK_KAFKA_POM)
    libs = _fetched(SPARK_KAFKA_POM, home, f"spark-sql-kafka {spark_version()}")
    return sorted(libs.glob("*.jar"))


def _fetched(pom: Path, home: Path, what: str) -> Path:
    """`home`/libs, holding the pom's jars, copied by Maven the first time (under a file
    lock, so that one of several processes asking at once fetches them)."""
    libs = home / "libs"
    done = home / "fetched"
    if done.exists():
        return libs
    with file_lock(home.with_name(home.name + ".lock")):
        if done.exists():  # another process fetched them while this one waited
            return libs
        if shutil.which("mvn") is None:
            raise RuntimeError(f"{what} is fetched with Maven: mvn is not on PATH")
        staging = home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        fetched = subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(pom),
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
                f"fetching {what} with Maven failed:\n"
                f"{fetched.stdout[-3000:]}{fetched.stderr[-3000:]}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        done.write_text(what + "\n")
    return libs


def java_command(
    main_class: str,
    *args: str,
    heap: str = "256m",
    classes: Path | None = None,
    sharing: list[str] | None = None,
) -> list[str]:
    """A JVM running one of Kafka's main classes over the cached jars (or a class of
    `classes`, a directory after them); C1 only and the serial collector, as a
    short-lived tool wants (start-up over peak speed). `sharing`: class data sharing
    flags (class_data.Archive.flags), by default those of the archive of the jars if one
    has been made (tools_archive)."""
    libs = kafka_jars()
    # The jars first, then `classes`: a JVM shares an archive's classes only where its
    # classpath begins with the archive's (the jars').
    classpath = f"{libs}/*" if classes is None else f"{libs}/*:{classes}"
    if sharing is None:
        sharing = tools_archive(dump=False).flags
    return [
        "java",
        f"-Xmx{heap}",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        *sharing,
        f"-Dlog4j2.configurationFile={libs.parent / 'tools-log4j2.properties'}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def tools_archive(dump: bool = True) -> class_data.Archive:
    """The class data sharing of a JVM over Kafka's jars (its tools, the Java client's
    harness): the archive the first tool run made (class_data.py), or, with `dump`, this
    run's making it if there is none yet."""
    libs = kafka_jars()
    return class_data.archive_for(libs.parent / "class-data", "kafka-tools", f"{libs}/*", dump)


def run_tool(main_class: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, run to its end; its output as text."""
    archive = tools_archive()
    returncode = None
    try:
        done = subprocess.run(
            java_command(main_class, *args, sharing=archive.flags),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=java_env(),
        )
        returncode = done.returncode
    finally:
        archive.publish(returncode)
    return done


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


# --- a broker -----------------------------------------------------------------------------

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# The broker's log: INFO to a file (the bench and the tests read it when a start fails).
BROKER_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""


def random_cluster_id() -> str:
    """A cluster id as Kafka makes one (kafka-storage.sh random-uuid): a random UUID,
    base64url without padding."""
    import base64
    import uuid

    # Kafka's Uuid.randomUuid draws again for a string that starts with "-", which a
    # command line would read as an option (kafka-storage format -t -abc... fails).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One Apache Kafka broker in KRaft combined mode (broker and controller in one
    process), on 127.0.0.1, started from the cached jars with a generated config: the
    set-up of Kafka's quickstart, with the single-broker replication factors of its
    config/server.properties. `overrides` are more server properties by Kafka's names."""

    def __init__(
        self,
        home: Path,
        port: int,
        controller_port: int,
        overrides: dict[str, str] | None = None,
        heap: str = "1g",
        jvm_flags: list[str] | None = None,
    ) -> None:
        self.home = home
        self.port = port
        self.controller_port = controller_port
        self.heap = heap
        # In place of the flags of kafka-server-start.sh (a test's short-lived broker
        # wants start-up over peak speed: C1 alone, the serial collector).
        self.jvm_flags = jvm_flags
        self.log_dir = home / "data"
        self.log_file = home / "server.log"
        self.config_file = home / "server.properties"
        self.settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def jvm_settings(self) -> list[str]:
        """The JVM's flags, for a report: the heap and collector Kafka's scripts choose
        (kafka-server-start.sh: -Xmx1G -Xms1G, G1 with a 20 ms pause goal), unless the
        caller gave its own."""
        if self.jvm_flags is not None:
            return [f"-Xmx{self.heap}", *self.jvm_flags]
        return [
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
        ]

    def format(self, cluster_id: str | None = None, initial_controllers: str | None = None) -> None:
        """kafka-storage.sh format: the log dir made a KRaft voter's, the only one of its
        quorum (--standalone) or one of `initial_controllers` (--initial-controllers,
        `id@host:port:directory-id,...`, the same list for every voter of a cluster)."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "".join(f"{key}={value}\n" for key, value in self.settings.items())
        )
        quorum = (
            ["--standalone"]
            if initial_controllers is None
            else ["--initial-controllers", initial_controllers]
        )
        done = run_tool(
            STORAGE_TOOL,
            "format",
            "-t",
            cluster_id or random_cluster_id(),
            "-c",
            str(self.config_file),
            *quorum,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {done.stdout}{done.stderr}")

    def command(self) -> list[str]:
        """The broker's command line (its log dir formatted first, where it is not yet)."""
        if not self.config_file.exists():
            self.format()
        log4j = self.home / "log4j2.properties"
        log4j.write_text(BROKER_LOG4J2.format(log_file=self.log_file))
        libs = kafka_jars()
        return [
            "java",
            *self.jvm_settings(),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{libs}/*",
            KAFKA_MAIN,
            str(self.config_file),
        ]

    def start(self) -> KafkaBroker:
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> None:
        """The JVM started, not waited for: a voter of a larger quorum opens its broker
        listener only once a quorum of the voters runs (KafkaCluster starts them all, then
        waits)."""
        command = self.command()
        # Appended to: a node started again (the failover bench) keeps its first run's output.
        with open(self.home / "stdout.log", "ab") as output:
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=java_env()
            )

    def wait_ready(self) -> None:
        """Return once the broker listener accepts connections; stop the broker and raise
        RuntimeError, with its log's end, if it exits or does not in START_TIMEOUT_S."""
        from brook.broker.testing import wait_for_port

        try:
            wait_for_port(self.port, START_TIMEOUT_S, self.process)
        except (RuntimeError, TimeoutError) as exc:
            self.stop()
            raise RuntimeError(f"Apache Kafka did not start: {exc}\n{self.log_tail()}") from None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def kill(self) -> None:
        """SIGKILL to this broker's JVM (its own pid), as a crash: no controlled shutdown."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_file.read_text() if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> int:
        """A clean shutdown (SIGTERM, as kafka-server-stop.sh sends); the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        code = self.process.returncode
        self.process = None
        return code


class KafkaCluster:
    """`count` Apache Kafka nodes on 127.0.0.1 in KRaft combined mode, node ids 1..count,
    each a broker and a voter of the controller quorum: the multi-node set-up of Kafka's
    documentation (one cluster id; every node formatted with `kafka-storage format
    --initial-controllers` naming all the voters), with Kafka's own replication defaults
    for the internal topics (3 replicas, min.insync.replicas 2). A context manager: the
    JVMs it started are stopped, by pid, when the block ends, also on failure."""

    def __init__(
        self,
        root: Path,
        count: int = 3,
        overrides: dict[str, str] | None = None,
        heap: str = "512m",
        jvm_flags: list[str] | None = None,
    ) -> None:
        from brook.broker.local_ports import free_port

        self.root = root
        self.cluster_id = random_cluster_id()
        controller_ports = {node_id: free_port() for node_id in range(1, count + 1)}
        # KafkaBroker's single-node replication factors set back to Kafka's defaults
        # (capped by the size of the cluster).
        replicas = str(min(3, count))
        min_isr = str(min(2, count))
        shared = {
            "controller.quorum.bootstrap.servers": ",".join(
                f"127.0.0.1:{port}" for port in controller_ports.values()
            ),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            **(overrides or {}),
        }
        self.nodes = {
            node_id: KafkaBroker(
                root / f"node-{node_id}",
                free_port(),
                controller_port,
                {**shared, "node.id": str(node_id)},
                heap=heap,
                jvm_flags=jvm_flags,
            )
            for node_id, controller_port in controller_ports.items()
        }
        # Each voter is named with the directory id of its metadata log dir, which the
        # format of that node writes; the same list goes to every node's format. A
        # directory id is a Uuid in the text of a cluster id.
        self.initial_controllers = ",".join(
            f"{node_id}@127.0.0.1:{port}:{random_cluster_id()}"
            for node_id, port in controller_ports.items()
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    def __enter__(self) -> KafkaCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Every node formatted, then all launched before any is waited for: a node's
        broker listener opens once the quorum has elected a leader, for which a majority of
        the voters must run."""
        for node in self.nodes.values():
            node.format(self.cluster_id, self.initial_controllers)
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_ready()

    def kill(self, node_id: int) -> None:
        """SIGKILL to one node's JVM, as a crash (the failover bench)."""
        self.nodes[node_id].kill()

    def restart(self, node_id: int) -> None:
        """A node started again on its log dir, as it was (after a kill)."""
        self.nodes[node_id].start()

    def stop(self) -> None:
        """SIGTERM to every node first, then each waited for (SIGKILL after
        STOP_TIMEOUT_S): the nodes shut down together rather than one after another."""
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes.values():
            node.stop()

    def active_controller(self) -> int:
        """The node id of the quorum's leader, the active controller (kafka-metadata-quorum
        describe --status; a broker's DescribeCluster names a random broker in KRaft)."""
        described = run_tool(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-server",
            self.bootstrap,
            "describe",
            "--status",
            timeout=60,
        )
        found = re.search(r"^LeaderId:\s*(\d+)", described.stdout, re.MULTILINE)
        if found is None:
            raise RuntimeError(
                f"kafka-metadata-quorum names no leader:\n{described.stdout}{described.stderr}"
            )
        return int(found.group(1))
