"""The distribution ships every package: pyproject lists them by hand (the import names
differ from the folders), so a new folder must be added there too."""

from __future__ import annotations

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
