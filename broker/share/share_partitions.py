"""The broker's SharePartitionManager, made by the first share fetch or acknowledgement.

Its modules (the share partition, sessions, the log reads they do) are of no use to a
broker that no share consumer talks to, and start-up imports none of them, as it imports
no coordinator before a client needs one (coordinator/coordinators.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .persister import CoordinatorPersister
    from .share_partition_manager import SharePartitionManager


class SharePartitions:
    def __init__(
        self,
        make: Callable[[CoordinatorPersister], SharePartitionManager],
        make_persister: Callable[[], CoordinatorPersister],
    ) -> None:
        self._make = make
        self._make_persister = make_persister
        self._made: SharePartitionManager | None = None
        self._persister: CoordinatorPersister | None = None

    @property
    def persister(self) -> CoordinatorPersister:
        """The share coordinators' client, for the group coordinator's admin requests too."""
        if self._persister is None:
            self._persister = self._make_persister()
        return self._persister

    @property
    def made(self) -> bool:
        return self._made is not None

    @property
    def manager(self) -> SharePartitionManager:
        if self._made is None:
            self._made = self._make(self.persister)
        return self._made

    def connection_closed(self, connection: str) -> None:
        """A client's connection closed: the share sessions it held end."""
        if self._made is not None and len(self._made.sessions):
            self._made.connection_closed(connection)

    def on_leadership_lost(self, topic: str, index: int) -> None:
        if self._made is not None:
            self._made.on_leadership_lost(topic, index)
