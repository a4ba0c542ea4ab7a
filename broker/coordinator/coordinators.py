"""The group and transaction coordinators, made when something first needs them.

Their modules (the coordinator records' codecs, the group and transaction state machines,
the runtime) are about a fifth of what `brook serve` imports before it accepts
connections, and many brokers (a test broker for a producer, a tool's target) never see
a group or a transaction. So a broker whose data holds neither `__consumer_offsets` nor
`__transaction_state` starts without them, and the first request that needs one makes
both (the transaction coordinator commits offsets through the group coordinator). A
broker that has either topic makes them at start, since they must load what it keeps.
Making them then cannot miss anything to load: only they create their topics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..groups.coordinator import GroupCoordinator
    from ..share.share_coordinator import ShareCoordinator
    from ..transactions.coordinator import TransactionCoordinator
    from .loop_timer import LoopTimer

# The coordinators and the timer their sessions, rebalances and timeouts run on.
CoordinatorParts = tuple[
    "GroupCoordinator", "TransactionCoordinator", "ShareCoordinator", "LoopTimer"
]


class Coordinators:
    def __init__(self, make: Callable[[], CoordinatorParts]) -> None:
        self._make = make
        self._made: CoordinatorParts | None = None

    @property
    def made(self) -> bool:
        return self._made is not None

    def _parts(self) -> CoordinatorParts:
        if self._made is None:
            self._made = self._make()
        return self._made

    @property
    def groups(self) -> GroupCoordinator:
        return self._parts()[0]

    @property
    def transactions(self) -> TransactionCoordinator:
        return self._parts()[1]

    @property
    def share(self) -> ShareCoordinator:
        return self._parts()[2]

    async def start(self) -> None:
        """Make them now and load their topics' partitions (a broker that has them)."""
        groups, transactions, share, _ = self._parts()
        await groups.start()
        await transactions.start()
        await share.start()

    def on_leadership_change(self, topic: str, partition: int, leads: bool, empty: bool) -> None:
        """A partition of `__consumer_offsets`, `__transaction_state` or
        `__share_group_state` changed hands: its coordinator loads it here, or drops it
        (Kafka's onElection/onResignation)."""
        groups, transactions, share, _ = self._parts()
        coordinator: GroupCoordinator | TransactionCoordinator | ShareCoordinator
        if topic == groups.runtime.topic.name:
            coordinator = groups
        elif topic == share.runtime.topic.name:
            coordinator = share
        else:
            coordinator = transactions
        if leads:
            coordinator.on_election(partition, empty)
        else:
            coordinator.on_resignation(partition)

    def stop(self) -> None:
        if self._made is not None:
            _, transactions, _, timer = self._made
            transactions.stop()
            timer.close()
