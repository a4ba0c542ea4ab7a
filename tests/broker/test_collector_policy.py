"""The broker's use of the cyclic garbage collector (broker/server/collector_policy.py):
what survives a full collection is frozen, so later full collections leave it out, and
everything is unfrozen every review interval, so that a frozen cycle that became garbage
is collected then. With the process's real collector, and a real broker in it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path

from brook.broker.server.collector_policy import CollectorPolicy
from brook.broker.testing import BrokerThread


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> tuple[_Node, weakref.ref[_Node]]:
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    return first, weakref.ref(second)


def test_survivors_of_a_full_collection_are_frozen_and_reviewed() -> None:
    async def scenario() -> None:
        policy = CollectorPolicy(asyncio.get_running_loop(), review_interval_s=0.2)
        policy.start()
        try:
            held, alive = _cycle()
            gc.collect()  # a full collection: the cycle survives it, and is frozen
            assert gc.get_freeze_count() > 0
            del held  # garbage now, but frozen: no collection looks at it
            gc.collect()
            assert alive() is not None
            # The review unfreezes everything: the next full collection finds it.
            while gc.get_freeze_count() > 0:
                await asyncio.sleep(0.05)
            gc.collect()
            assert alive() is None
        finally:
            policy.stop()

    asyncio.run(scenario())
    assert gc.get_freeze_count() == 0


def test_a_broker_freezes_what_survives_full_collections_until_it_stops(tmp_path: Path) -> None:
    callbacks = len(gc.callbacks)
    broker = BrokerThread(tmp_path / "data").start()
    try:
        assert len(gc.callbacks) == callbacks + 1
        gc.collect()
        assert gc.get_freeze_count() > 0
    finally:
        broker.stop()
    assert gc.get_freeze_count() == 0
    assert len(gc.callbacks) == callbacks  # its policy is gone with it
