"""The controller election, as Kafka's KafkaController.elect() runs it over ZooKeeper.

Whoever creates the ephemeral /controller is the controller. It does so in one
transaction with the conditional write of /controller_epoch + 1 (the version it read),
so two brokers can never both become controller of the same epoch, and the epoch goes
up by exactly one per controller. Every broker watches /controller: when it goes (its
owner's session ended), every broker tries again and one wins; when it appears, the
others learn who won and which epoch it holds. A broker whose session expires has lost
its /controller with it, and stops being the controller at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from brook.storage.clock import Clock

from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import NodeExistsError, NoNodeError, TransactionRequest, WatchedEvent
from .serial_job import SerialJob

log = logging.getLogger("brook.controller.election")

NO_CONTROLLER = -1


@dataclass(frozen=True, slots=True)
class ControllerState:
    """Who the controller is and its epoch (-1 and 0 while nobody is known)."""

    controller_id: int = NO_CONTROLLER
    epoch: int = 0
    # The version of /controller_epoch the controller wrote: the controller's later
    # writes are conditional on it (Kafka's expectedControllerEpochZkVersion).
    epoch_zk_version: int = -1


ControllerListener = Callable[[ControllerState, bool], None]


class ControllerElection:
    def __init__(self, client: ZooKeeperClient, broker_id: int, clock: Clock) -> None:
        self._client = client
        self._broker_id = broker_id
        self._clock = clock
        self.state = ControllerState()
        self._listeners: list[ControllerListener] = []
        self._job = SerialJob("the controller election", self._elect)

    @property
    def is_controller(self) -> bool:
        return self.state.controller_id == self._broker_id

    def add_listener(self, listener: ControllerListener) -> None:
        """`listener(state, is_controller)` on the loop whenever either changes."""
        self._listeners.append(listener)

    async def start(self) -> None:
        self._job.schedule()
        await self._job.idle()

    def schedule(self) -> None:
        self._job.schedule()

    def close(self) -> None:
        self._job.close()

    def session_lost(self) -> None:
        """The session expired: /controller went with it, whatever we knew is old."""
        self._set(ControllerState())

    def _changed(self, event: WatchedEvent) -> None:
        # Created, changed, deleted, or the connection lost (kazoo drops its watches
        # then): read again, and try to become the controller if there is none.
        self._job.schedule()

    async def _elect(self) -> None:
        while True:
            # exists() sets the watch whether or not there is a controller now.
            if await self._client.exists(znodes.CONTROLLER, self._changed) is not None:
                current = await self._read_controller()
                if current is not None:
                    self._set(current)
                    return
                continue  # went while we read it: elect
            if await self._try_to_become_controller():
                return

    async def _read_controller(self) -> ControllerState | None:
        """The controller and epoch as ZooKeeper holds them, or None if there is none."""
        try:
            data, stat = await self._client.get(znodes.CONTROLLER)
            epoch_data, epoch_stat = await self._client.get(znodes.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        controller_id = znodes.decode_controller(data)
        if controller_id == self._broker_id and stat.ephemeralOwner != self._client.session_id:
            # This broker's from a session that has ended: not ours to act on. It goes
            # with that session's timeout, and the watch then elects again.
            log.info("/controller names this broker from an ended session; waiting for it to go")
            return ControllerState()
        return ControllerState(
            controller_id, znodes.decode_controller_epoch(epoch_data), epoch_stat.version
        )

    async def _try_to_become_controller(self) -> bool:
        """One attempt; True when the outcome is known (we won, or someone else did)."""
        with contextlib.suppress(NodeExistsError):
            await self._client.create(
                znodes.CONTROLLER_EPOCH,
                znodes.encode_controller_epoch(znodes.INITIAL_CONTROLLER_EPOCH - 1),
            )
        data, stat = await self._client.get(znodes.CONTROLLER_EPOCH)
        epoch = znodes.decode_controller_epoch(data) + 1
        controller = znodes.encode_controller(self._broker_id, self._clock())

        def build(transaction: TransactionRequest) -> None:
            transaction.create(znodes.CONTROLLER, controller, ephemeral=True)
            transaction.set_data(
                znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), stat.version
            )

        created, written = await self._client.multi(build)
        if isinstance(created, Exception) or isinstance(written, Exception):
            # Someone else got there first (NodeExists), or a controller came and went
            # since we read the epoch (BadVersion); a second try of ours that had
            # already won shows as /controller owned by our own session.
            current = await self._read_controller()
            if current is None:
                return False
            self._set(current)
            return True
        self._set(ControllerState(self._broker_id, epoch, written.version), won=True)
        return True

    def _set(self, state: ControllerState, won: bool = False) -> None:
        if state == self.state:
            return
        was_controller = self.is_controller
        self.state = state
        if self.is_controller and not was_controller and not won:
            # /controller of our own session, read again after a disconnection.
            log.info(
                "[Controller id=%d] Still the controller after reconnecting to ZooKeeper"
                " (controller epoch %d)",
                self._broker_id,
                state.epoch,
            )
        elif self.is_controller and not was_controller:
            # Kafka's line, so that a grep for it finds the same moment.
            log.info(
                "[Controller id=%d] %d successfully elected as the controller. Epoch"
                " incremented to %d and epoch zk version is now %d",
                self._broker_id,
                self._broker_id,
                state.epoch,
                state.epoch_zk_version,
            )
        elif was_controller and not self.is_controller:
            log.info(
                "[Controller id=%d] Resigning: the controller is now %s",
                self._broker_id,
                state.controller_id if state.controller_id != NO_CONTROLLER else "unknown",
            )
        elif state.controller_id != NO_CONTROLLER:
            log.info(
                "Broker %d is the controller (controller epoch %d)",
                state.controller_id,
                state.epoch,
            )
        for listener in list(self._listeners):
            listener(state, self.is_controller)
