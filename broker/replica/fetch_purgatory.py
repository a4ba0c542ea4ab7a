"""Where long-polling fetches wait (Kafka's fetch purgatory): each parks on a future
that an append to one of its partitions completes; at shutdown all are completed at
once, so that they answer with what there is instead of waiting out max_wait."""

from __future__ import annotations

import asyncio


class FetchPurgatory:
    def __init__(self) -> None:
        self.parked: set[asyncio.Future[None]] = set()
        self.closing = False

    def park(self, waiter: asyncio.Future[None]) -> None:
        self.parked.add(waiter)

    def unpark(self, waiter: asyncio.Future[None]) -> None:
        self.parked.discard(waiter)

    def close(self) -> None:
        """Shutting down: answer every parked fetch now, and park no more for long."""
        self.closing = True
        for waiter in list(self.parked):
            if not waiter.done():
                waiter.set_result(None)
