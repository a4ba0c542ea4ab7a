"""The right to lead, held only while ZooKeeper has lately answered this broker.

ZooKeeper expires a session one session timeout after it last heard from the client; only
then may the controller elect another leader for this broker's partitions. Any request
this broker sent and saw answered proves ZooKeeper heard from it no earlier than when it
was sent. So a leader that saw, on the monotonic clock, an answer to a request sent less
than a part of the session timeout ago still leads: no other broker can have been elected.

The session listener (membership.py) fences the broker when kazoo reports a lost
connection, but a paused process (SIGSTOP, a long GC-like stall, a VM frozen) resumes
with requests already queued on its sockets and serves them before kazoo's thread can
report anything. The lease covers that: every append as leader asks `held()` first,
and time that passed while the process was stopped counts against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("brook.zookeeper")

# The lease lasts this part of the session timeout from the sending of the last request
# ZooKeeper answered: a third of the timeout to spare for the controller's own delays and
# clocks, yet long enough that a few renewals may be slow before writes are refused.
LEASE_PART_OF_SESSION = 2 / 3
# Renewed this often (a part of the session timeout): several renewals fit in a lease.
RENEW_PART_OF_SESSION = 1 / 8


class LeadershipLease:
    def __init__(
        self,
        session_timeout_ms: Callable[[], int],
        ask_zookeeper: Callable[[], Awaitable[object]],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # The negotiated timeout may change with a new session: read it each time.
        self._session_timeout_ms = session_timeout_ms
        self._ask_zookeeper = ask_zookeeper
        self._monotonic = monotonic
        # When the request last answered was sent (None: none answered yet).
        self._answered_request_sent: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._expired_logged = False

    def renewed(self, sent_at: float) -> None:
        """A request sent at `sent_at` (monotonic seconds) was answered by ZooKeeper."""
        if self._answered_request_sent is None or sent_at > self._answered_request_sent:
            self._answered_request_sent = sent_at
        self._expired_logged = False

    def held(self) -> bool:
        """Whether no other broker can have been elected leader of what this one leads."""
        sent = self._answered_request_sent
        if sent is None:
            return False
        age_ms = (self._monotonic() - sent) * 1000
        if age_ms < self._session_timeout_ms() * LEASE_PART_OF_SESSION:
            return True
        if not self._expired_logged:
            self._expired_logged = True
            log.warning(
                "ZooKeeper last answered a request sent %d ms ago (session timeout %d ms):"
                " this broker takes no writes as leader until it answers again (the process"
                " was paused or the event loop stalled, or ZooKeeper is unreachable)",
                age_ms,
                self._session_timeout_ms(),
            )
        return False

    async def renew_now(self) -> None:
        """Renew at once (back in ZooKeeper: the answer to a request sent before the cut
        proves nothing new, and the periodic renewal may be a while away)."""
        sent_at = self._monotonic()
        await self._ask_zookeeper()
        self.renewed(sent_at)

    def start(self) -> None:
        """Renew on the event loop from now until close()."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._renew_forever())

    async def _renew_forever(self) -> None:
        while True:
            try:
                await self.renew_now()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # The lease runs out on its own; the session listener says why.
                log.debug("Renewing the leadership lease failed: %s", exc)
            await asyncio.sleep(self._session_timeout_ms() * RENEW_PART_OF_SESSION / 1000)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
