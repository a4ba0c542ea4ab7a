"""README.md documents every broker config key and every served API: keep them in step;
its reader example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from brook.broker.config import BROKER_CONFIGS
from brook.broker.topic_config import TOPIC_CONFIGS
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
