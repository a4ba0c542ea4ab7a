"""The distribution ships every package: pyproject lists them by hand (the import names
differ from the folders), so a new folder must be added there too; and it depends on no
Kafka client library."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
SOURCE_ROOTS = ("protocol", "storage", "coordinator_state", "broker", "spark")


def test_every_source_package_is_listed_in_pyproject():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        "brook." + ".".join(init.parent.relative_to(ROOT).parts)
        for source in SOURCE_ROOTS
        if (ROOT / source).is_dir()
        for init in (ROOT / source).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages"


CLIENT_LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[@]", requirement, maxsplit=1)[0].lower()


def test_the_broker_installs_no_kafka_client_library():
    """The broker and its tools speak the protocol through its own client; the pytest
    helpers' client is the `testing` extra, asked for by name when missing."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_name(requirement) for requirement in project["dependencies"]}
    assert required & set(CLIENT_LIBRARIES) == set(), "the broker must not depend on a client"
    testing = {_name(r) for r in project["optional-dependencies"]["testing"]}
    assert "confluent-kafka" in testing
