"""README.md documents every broker config key and every served API: keep them in step."""

from __future__ import annotations

import re
from pathlib import Path

from brook.broker.config import BROKER_CONFIGS
from brook.broker.topic_config import TOPIC_CONFIGS
from brook.protocol.api_table import SERVED

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
