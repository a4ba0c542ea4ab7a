"""Producer ids that are never handed out twice, even across restarts.

Like Kafka's controller, ids are reserved in blocks: the end of the current block is
written to disk before any id of it is used, so a crash skips the rest of a block
instead of repeating ids.
"""

from __future__ import annotations

from pathlib import Path

from brook.storage.checkpoints import read_json, write_json
from brook.storage.errors import CorruptCheckpointError

BLOCK_SIZE = 1000
STATE_FILE = "brook-producer-ids.json"


class ProducerIdManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / STATE_FILE
        self._next = 0
        self._block_end = 0  # exclusive
        stored = read_json(self.path)
        if stored is not None:
            try:
                self._next = self._block_end = int(stored["next_block"])
            except (TypeError, KeyError, ValueError):
                raise CorruptCheckpointError(
                    f"{self.path} is damaged: no next_block in {stored!r}"
                ) from None

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve(self, block_end: int) -> None:
        write_json(self.path, {"next_block": block_end})
        self._block_end = block_end
