"""A partition this broker hosts: its log, its leadership, and who waits for new data."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from brook.protocol.record_batch import BatchHeader
from brook.storage.log import Log


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    # Fetches parked until this partition gets new data (long polling).
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def is_offline(self) -> bool:
        """Its log dir failed: every request for it answers KAFKA_STORAGE_ERROR."""
        return self.log.is_offline

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def append_as_leader(self, buffer: bytearray, batches: list[BatchHeader], now_ms: int) -> Any:
        info = self.log.append_as_leader(buffer, batches, self.leader_epoch, now_ms)
        # A single broker is the whole ISR, so what it has written is committed.
        self.log.high_watermark = self.log.log_end_offset
        self.wake_waiters()
        return info

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self.waiters.append(waiter)

    def wake_waiters(self) -> None:
        if not self.waiters:
            return
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
