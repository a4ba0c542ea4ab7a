"""The controller's writes to ZooKeeper, each fenced by the controller epoch, sent together.

Every write of the controller is a transaction that also checks /controller_epoch's
version (a controller that lost its election can change nothing). Written one
transaction each, the thousands of partition states of a big topic, or of every
partition a stopping broker leads, cost a round trip, a future and a hop between kazoo's
thread and the loop apiece. The writes asked for in one turn of the loop (the
controller's deciders run side by side: controller_duties._elect) go out instead as one
transaction of up to WRITES_PER_TRANSACTION of them, with one epoch check.

A transaction is all or nothing, but the writes in it are independent: when one fails
(a partition's state changed meanwhile, say), ZooKeeper rolls the others back with it,
and they are sent again without it; the failed one gets its own error, as it would
alone. The caller sees exactly what a transaction of its own would have given it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from . import znodes
from .client import ZooKeeperClient
from .controller_election import ControllerState
from .kazoo_api import (
    BadVersionError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    TransactionRequest,
)

# Writes in one transaction at most: a partition's state is some 100 bytes and its path
# some 60, far below ZooKeeper's 1 MB request limit (jute.maxbuffer).
WRITES_PER_TRANSACTION = 100

Build = Callable[[TransactionRequest], None]
_Pending = tuple[ControllerState, Build, "asyncio.Future[list[Any]]"]


class ControllerFencedError(Exception):
    """The controller epoch moved on: this broker is no longer the controller."""


class FencedWrites:
    def __init__(self, client: ZooKeeperClient) -> None:
        self._client = client
        self._pending: list[_Pending] = []
        self._sending: set[asyncio.Future[None]] = set()

    async def write(self, state: ControllerState, build: Build) -> list[Any]:
        """`build`'s operations done in a transaction checking the controller epoch: the
        results of the epoch check and of each operation. Raises ControllerFencedError
        when the epoch moved on, or the error of the operation that failed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._send_pending)
        self._pending.append((state, build, future))
        return await future

    def _send_pending(self) -> None:
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), WRITES_PER_TRANSACTION):
            batch = pending[start : start + WRITES_PER_TRANSACTION]
            # One epoch to check per transaction (a new election in between splits them).
            by_epoch: dict[int, list[_Pending]] = {}
            for item in batch:
                by_epoch.setdefault(id(item[0]), []).append(item)
            for writes in by_epoch.values():
                task = asyncio.ensure_future(self._send(writes))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _send(self, writes: list[_Pending]) -> None:
        while writes:
            state = writes[0][0]
            sizes: list[int] = []
            try:
                results = await self._client.multi(
                    functools.partial(_build_all, state, writes, sizes)
                )
            except Exception as exc:  # the whole transaction: every write fails with it
                for _, _, future in writes:
                    if not future.done():
                        future.set_exception(exc)
                return
            if isinstance(results[0], BadVersionError | NoNodeError):
                for _, _, future in writes:
                    if not future.done():
                        future.set_exception(ControllerFencedError())
                return
            writes = self._settle(writes, sizes, results)

    @staticmethod
    def _settle(writes: list[_Pending], sizes: list[int], results: list[Any]) -> list[_Pending]:
        """Give each write its results; the writes rolled back only because another
        failed, to send again."""
        rolled_back = any(_failed(result) for result in results[1:])
        again: list[_Pending] = []
        position = 1
        for item, size in zip(writes, sizes, strict=True):
            own = results[position : position + size]
            position += size
            future = item[2]
            error = next((result for result in own if _failed(result)), None)
            if future.done():
                continue  # its caller was cancelled
            if error is not None:
                future.set_exception(error)
            elif rolled_back:
                again.append(item)
            else:
                future.set_result([results[0], *own])
        return again


def _build_all(
    state: ControllerState,
    writes: list[_Pending],
    sizes: list[int],
    transaction: TransactionRequest,
) -> None:
    """The epoch check, then every write's operations; `sizes` gets how many each added."""
    sizes.clear()  # built again when a lost connection makes the transaction resent
    transaction.check(znodes.CONTROLLER_EPOCH, state.epoch_zk_version)
    for _, build, _ in writes:
        before = len(transaction.operations)
        build(transaction)
        sizes.append(len(transaction.operations) - before)


def _failed(result: Any) -> bool:
    """An operation's own failure (not its rollback because another failed)."""
    return isinstance(result, Exception) and not isinstance(
        result, RolledBackError | RuntimeInconsistency
    )
