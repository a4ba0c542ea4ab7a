from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import ScriptedController


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ScriptedController]:
    controller = ScriptedController(tmp_path)
    yield controller
    controller.close()
