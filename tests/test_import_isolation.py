"""What the packages import, checked in fresh interpreters.

brook.storage, brook.protocol and brook.coordinator_state are what a Spark executor
imports: they must load no part of the broker, no Kafka client and (for the storage
reader's path) no asyncio. The broker must not load a client library to serve, and its
tools run on its own client: with every client library unimportable, each tool's module
imports and each tool works.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from brook.broker.testing import BrokerProcess, BrokerThread

CLIENT_LIBRARIES = ("confluent_kafka", "kafka", "aiokafka")
# Runs `brook ARGS` (sys.argv[1:]) in a fresh interpreter where importing any Kafka client
# library fails, as it would where none is installed.
WITHOUT_CLIENTS = f"""
import sys
for name in {CLIENT_LIBRARIES!r}:
    sys.modules[name] = None  # `import name` raises ImportError
sys.argv[0] = "brook"
from brook.broker.entry import main
main()
"""

# Runs in a fresh interpreter: records which module first imported asyncio, imports every
# module of the given packages (and runs the reader over a damaged batch when asked),
# then prints the modules loaded.
PROBE = r"""
import importlib, json, pkgutil, sys

first_importer = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "asyncio" and not first_importer:
            frame = sys._getframe(1)
            while frame and frame.f_globals.get("__name__", "").startswith(
                ("importlib", "_frozen_importlib")
            ):
                frame = frame.f_back
            first_importer.append(frame.f_globals.get("__name__") if frame else None)
        return None

sys.meta_path.insert(0, Watch())
packages, exercise = json.loads(sys.argv[1])
for name in packages:
    package = importlib.import_module(name)
    for module in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(module.name)
if exercise:
    import tempfile
    from pathlib import Path
    from brook.protocol.errors import InvalidRecordError
    from brook.protocol.record_batch import Record, build_batch, parse_header
    from brook.storage.reader import SegmentReader
    from brook.protocol.record_batch import decode_records

    # Records that end early: the second is one byte long (its attributes), so the
    # next varint would start at the end of the buffer.
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"v")]))
    first_length = batch[61] >> 1
    del batch[61 + 1 + first_length :]
    batch += b"\x02\x00"
    for malformed in (batch, batch[:-1]):
        header = parse_header(malformed)
        header.batch_length = len(malformed) - 12
        try:
            decode_records(malformed, header)
            raise SystemExit("a malformed batch decoded")
        except InvalidRecordError:
            pass
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / ("0" * 20 + ".log")
        path.write_bytes(build_batch([Record(0, 0, b"k", b"v")]) + b"\x00" * 30)
        with SegmentReader(path) as reader:
            assert len(list(reader.batches())) == 2  # a batch and the damage after it
print(json.dumps({"modules": sorted(sys.modules), "asyncio_importer": first_importer}))
"""


def probe(packages: list[str], exercise: bool = False) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([packages, exercise])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in prefixes or m.startswith("brook.broker")]


def test_storage_reader_path_loads_no_broker_or_client():
    """Every module of brook.storage, and the reader at work on damaged data. asyncio is
    loaded only by kio (kio.serial.writers names asyncio.StreamWriter in a type alias;
    the record decoder reads varints with kio.serial.readers): about 20 ms once per
    process, against 200 ms to import the reader."""
    found = probe(["brook.storage"], exercise=True)
    assert loaded(found["modules"], (*CLIENT_LIBRARIES, "uvloop")) == []
    assert "brook.storage.reader" in found["modules"]
    importer = found["asyncio_importer"]
    assert not importer or (importer[0] or "").startswith("kio."), importer


def test_protocol_loads_asyncio_only_through_kio():
    """brook.protocol's codecs of request/response bodies use kio.serial, whose writers
    module imports asyncio (for a type alias): a third party's import, not Brook's."""
    found = probe(["brook.protocol", "brook.storage"])
    assert loaded(found["modules"], (*CLIENT_LIBRARIES, "uvloop")) == []
    importer = found["asyncio_importer"]
    assert importer and importer[0].startswith("kio."), importer


def test_coordinator_state_loads_only_protocol_and_storage():
    """The coordinators' state and replay rules are shared by the broker and the offline
    audit (which runs in Spark's workers): they load no part of the broker, nor asyncio
    or a client library of their own."""
    found = probe(["brook.coordinator_state"])
    assert loaded(found["modules"], (*CLIENT_LIBRARIES, "uvloop")) == []
    brook = {m.split(".")[1] for m in found["modules"] if m.startswith("brook.")}
    assert brook == {"coordinator_state", "protocol", "storage"} or brook == {
        "coordinator_state",
        "protocol",
    }, brook
    # asyncio, where it is loaded, comes with kio's codecs (see the test above).
    importer = found["asyncio_importer"]
    assert not importer or (importer[0] or "").startswith("kio."), importer


def test_serving_loads_no_client_library(tmp_path: Path, monkeypatch):
    """`brook serve` up to listening, with Python's import log: no Kafka client, no tool,
    no ZooKeeper client (the broker has no zookeeper.connect), no log module (no topic)."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert broker.process is not None and broker.process.poll() is None
    finally:
        assert broker.stop() == 0
    log = broker.log_text()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in log.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "brook.broker.server.broker" in imported and "uvloop" in imported
    assert sorted(m for m in imported if m.split(".")[0] in CLIENT_LIBRARIES) == []
    # Nor ZooKeeper's client: a broker without zookeeper.connect runs alone.
    assert sorted(m for m in imported if m.split(".")[0] == "kazoo") == []
    assert "brook.broker.zookeeper.membership" not in imported
    # Nor the operator's tools: they cost start-up time and serve no request.
    assert sorted(m for m in imported if m.startswith("brook.broker.tools")) == []
    # Nor Prometheus' client: /metrics is served only with admin.listener set.
    assert sorted(m for m in imported if m.split(".")[0] == "prometheus_client") == []
    assert "brook.broker.server.admin_server" not in imported
    # Nor the log's modules (and the codecs they bring) while there is no log to open:
    # they come with the first partition or the first append.
    assert sorted(m for m in imported if m in ("brook.storage.log", "cramjam")) == []


def test_serving_imports_no_hypothesis_where_it_is_installed(tmp_path: Path, monkeypatch):
    """kio registers hypothesis strategies for its types whenever hypothesis is importable
    (over 100 ms and 12 MiB of a ~100 ms start): `brook serve`, here in an environment that
    holds hypothesis, imports none of it, through a client's first produce and read."""
    assert importlib.util.find_spec("hypothesis") is not None  # the test extra installs it
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        broker.produce("imports", [b"served"], partition=0)
        assert [record.value for record in broker.records("imports")] == [b"served"]
    finally:
        assert broker.stop() == 0
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in broker.log_text().splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "kio.static.primitive" in imported
    # kio's own attempt is logged, and fails: hypothesis reads as absent to it. A real
    # import brings hypothesis's submodules.
    assert sorted(m for m in imported if m.startswith("hypothesis.")) in (
        [],
        ["hypothesis.strategies"],
    )
    assert not any(m.startswith(("hypothesis.internal", "hypothesis.core")) for m in imported)


def test_hypothesis_stays_importable_after_the_command_lines_imports():
    """The command line hides hypothesis from kio only while kio loads: a later import of
    hypothesis in the same process still works (kio's types just have no strategies)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import brook.broker.cli, kio.static._phantom as phantom, hypothesis.strategies;"
            " print(phantom.hypothesis is None)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def brook_without_clients(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_CLIENTS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_tool_module_imports_without_a_client_library():
    """Every module of brook.broker.tools, imported where no Kafka client can be."""
    code = WITHOUT_CLIENTS.replace(
        "from brook.broker.entry import main\nmain()",
        "import importlib, json, pkgutil, brook.broker.tools as tools\n"
        "for module in pkgutil.walk_packages(tools.__path__, 'brook.broker.tools.'):\n"
        "    importlib.import_module(module.name)\n"
        "print(json.dumps(sorted(sys.modules)))",
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    for name in ("brook.broker.tools.topics", "brook.broker.tools.admin.groups"):
        assert name in modules


# Runs `brook ARGS` (sys.argv[1:]) in a fresh interpreter, then prints the tool modules
# it imported.
TOOLS_IMPORTED = """
import json, sys
sys.argv[0] = "brook"
from brook.broker.entry import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("brook.broker.tools."))))
"""


def tools_imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", TOOLS_IMPORTED, *args], capture_output=True, text=True, check=False
    )
    return {name.rsplit(".", 1)[1] for name in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.parametrize(
    ("command", "module", "other"),
    [("topics", "topics", "compact"), ("consumer-groups", "groups", "audit")],
)
def test_a_tools_command_line_imports_that_tool_alone(command, module, other):
    """`brook topics ...` loads the topics tool, not the thirteen others (they cost a
    third of the command's start); `brook --help` lists every tool, so loads them all."""
    one = tools_imported(command, "--help")
    assert module in one and other not in one
    assert {"topics", "groups", "compact", "audit", "cluster"} <= tools_imported("--help")


def test_every_tool_subcommand_is_in_the_lazy_table():
    """TOOL_MODULES names each tool's subcommands and aliases (a missing one would make
    `brook NAME` load every tool, and a wrong module would make it an unknown command)."""
    from brook.broker import cli

    for name, module in cli.TOOL_MODULES.items():
        parser = cli.build_parser(only=name)
        subcommands = next(a for a in parser._actions if a.dest == "command")
        assert name in subcommands.choices, (name, module)  # type: ignore[operator]
    every = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert set(every.choices) == {"serve", "configs-list", *cli.TOOL_MODULES}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tool",
    ["topics", "configs", "groups", "acls", "leader-election", "reassign", "transactions"],
)
def test_each_tool_helps_without_a_client_library(tool):
    ran = brook_without_clients(tool, "--help")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert ran.stdout.startswith(f"usage: brook {tool}")


def test_the_tools_act_without_a_client_library(tmp_path: Path):
    """One real action of each tool against a broker, none of them able to import a
    client library: they speak the protocol through the broker's own client."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        server = ["--bootstrap-server", broker.bootstrap]
        actions = [
            (["topics", *server, "--create", "--topic", "isolated", "--partitions", "2"], 0),
            (["topics", *server, "--describe", "--topic", "isolated"], 0),
            (
                [
                    "configs",
                    *server,
                    "--alter",
                    "--topic",
                    "isolated",
                    "--add-config",
                    "retention.ms=1000",
                ],
                0,
            ),
            (["configs", *server, "--describe", "--topic", "isolated"], 0),
            (["configs", *server, "--describe", "--entity-type", "clients"], 0),
            (
                [
                    "groups",
                    *server,
                    "--reset-offsets",
                    "--group",
                    "g",
                    "--topic",
                    "isolated",
                    "--to-earliest",
                    "--execute",
                ],
                0,
            ),
            (["groups", *server, "--describe", "--group", "g"], 0),
            (
                [
                    "leader-election",
                    *server,
                    "--election-type",
                    "PREFERRED",
                    "--all-topic-partitions",
                ],
                0,
            ),
            (["transactions", *server, "list"], 0),
            (["reassign", *server, "--list"], 0),
            # No authorizer: the broker's answer, SECURITY_DISABLED, on one line.
            (["acls", *server, "--list"], 1),
        ]
        for args, code in actions:
            ran = brook_without_clients(*args)
            assert ran.returncode == code, (args, ran)
            assert "Traceback" not in ran.stderr, (args, ran.stderr)
        described = brook_without_clients("topics", *server, "--describe", "--topic", "isolated")
        assert "PartitionCount: 2" in described.stdout and "retention.ms=1000" in described.stdout
        groups = brook_without_clients("groups", *server, "--list")
        assert groups.stdout.split() == ["g"], groups
        acls = brook_without_clients("acls", *server, "--list")
        assert "SECURITY_DISABLED" in acls.stderr, acls
    finally:
        broker.stop()


def test_the_pytest_helpers_name_the_extra_they_need_without_confluent_kafka(tmp_path: Path):
    """Without confluent-kafka a test broker starts and serves; its produce() says which
    extra brings the client it seeds topics through."""
    code = WITHOUT_CLIENTS.replace(
        "from brook.broker.entry import main\nmain()",
        "from brook.broker.testing import BrokerThread\n"
        "from brook.broker.testing.records import ClientLibraryMissingError\n"
        "broker = BrokerThread(sys.argv[1]).start()\n"
        "try:\n"
        "    broker.produce('seeded', [b'x'])\n"
        "except ClientLibraryMissingError as exc:\n"
        "    print(exc)\n"
        "finally:\n"
        "    broker.stop()\n",
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'brook-broker[testing]'" in done.stdout
