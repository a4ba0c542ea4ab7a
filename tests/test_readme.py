"""README.md documents every broker config key and every served API: keep them in step;
its reader example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from brook.broker.config.broker_config import BROKER_CONFIGS, BrokerConfig
from brook.broker.config.topic_config import TOPIC_CONFIGS
from brook.protocol.api_table import SERVED
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_every_broker_config_key_is_in_the_config_table():
    documented = set(re.findall(r"^\| `([a-z.]+)`", README, re.MULTILINE))
    # `log.retention.hours` / `.minutes` / `.ms` share one row.
    documented |= {"log.retention.minutes", "log.retention.ms"}
    missing = sorted(set(BROKER_CONFIGS) - documented)
    assert not missing, f"README's config table lacks {missing}"


def test_every_topic_config_key_is_named():
    missing = sorted(name for name in TOPIC_CONFIGS if f"`{name}`" not in README)
    assert not missing, f"README does not name the topic configs {missing}"


def test_compatibility_table_matches_the_served_versions():
    rows = dict(re.findall(r"^\| \w+ \| (\d+) \| (\d+(?:-\d+)?)", README, re.MULTILINE))
    for api_key, served in SERVED.items():
        expected = (
            str(served.min_version)
            if served.min_version == served.max_version
            else f"{served.min_version}-{served.max_version}"
        )
        assert rows.get(str(int(api_key))) == expected, (
            f"README's compatibility table is wrong for {api_key.name}"
        )


def test_the_reader_example_runs(tmp_path, capsys):
    """The Python example of "Reading segment files from Python", on a log Brook wrote."""
    section = README.split("## Reading segment files from Python", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    log = Log.open(tmp_path / "orders-0", LogConfig(segment_bytes=512))
    for n in range(12):
        batch = bytearray(build_batch([Record(0, 1_700_000_000_000 + n, b"k", b"hello %d" % n)]))
        log.append_as_leader(batch, 0, 1_700_000_000_000)
    log.close()
    exec(example.replace('"/tmp/brook"', repr(str(tmp_path))), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"orders 0 {sum(p.stat().st_size for p in log.dir.glob('*.log'))} bytes"
    assert sum(line.startswith("  ") and "indexed: True" in line for line in printed) > 1
    assert [line.strip() for line in printed if line.startswith("    ")] == [
        f"{n} {1_700_000_000_000 + n} b'k' b'hello {n}'" for n in range(12)
    ]


def test_the_quick_start_python_example_runs_twice(brook_broker):
    """Run twice in a row (within a group session timeout), the example reads a record
    each time and exits: it closes its consumer and polls until a record comes."""
    section = README.split("## Quick start", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    assert "consumer.close()" in example
    code = example.replace("127.0.0.1:9092", brook_broker.bootstrap)
    for _ in range(2):
        ran = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == "b'from python'\n"


ROOT = Path(__file__).parent.parent


def test_the_readme_points_only_at_what_its_reader_has():
    """No issue numbers (they mean nothing to a user) and no document outside the
    repository: every Markdown file it names is in the checkout."""
    assert re.findall(r"\bissue \d+", README, re.IGNORECASE) == []
    named = set(re.findall(r"[\w./-]*\b[\w-]+\.md\b", README))
    assert sorted(name for name in named if not (ROOT / name).is_file()) == []


def test_the_readme_says_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^exec (.+)$", ci, re.MULTILINE).group(1)
    said = re.search(r"`\.ci/run` runs (?:exactly )?`([^`]+)`", README).group(1)
    assert said == command


def test_the_install_commands_say_what_the_broker_binds_and_advertises():
    """The first `brook serve` of the README, with Kafka's default listeners: where it
    listens and what it tells clients, as the broker's own config has them."""
    block = re.search(r"```sh\n(.*?)```", README, re.DOTALL).group(1)
    serve = next(line for line in block.splitlines() if "brook serve" in line)
    overrides = re.findall(r"--override (\S+)", serve)
    config = BrokerConfig.build({}, {}, overrides)
    (bound,) = config.listeners
    (advertised,) = config.advertised_listeners
    comment = " ".join(line for line in block.splitlines() if line.startswith("#"))
    assert f"{bound.host or '0.0.0.0'}:{bound.port}" in comment
    assert f"{advertised.host}:{advertised.port}" in comment


def test_the_quick_start_runs_brook_from_where_the_install_put_it():
    """After the install command (a venv at .venv, not activated), a bare `brook` is not
    on PATH: the Quick start calls the venv's."""
    install = re.search(r"```sh\n(.*?)```", README, re.DOTALL).group(1)
    venv = re.search(r"python3 -m venv (\S+) ", install).group(1)
    section = README.split("## Quick start", 1)[1]
    commands = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1).splitlines()
    brook = [line.split()[0] for line in commands if re.match(r"\S*brook ", line)]
    assert brook and set(brook) == {f"{venv}/bin/brook"}
