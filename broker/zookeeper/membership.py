"""A broker's membership of a ZooKeeper cluster, in Kafka's order (KafkaServer.startup):

1. connect within zookeeper.connection.timeout.ms (the chroot made where missing, then
   Kafka's persistent paths), before the log dirs are touched;
2. take the cluster id from /cluster/id, the first broker making it;
3. refuse a broker.id another live broker has registered;
4. once listening, register the ephemeral /brokers/ids/<id>, follow the live brokers
   into the metadata cache, and take part in the controller election;
5. disconnected for a quarter of the session timeout, stop acting as controller (before
   ZooKeeper can expire the session); in a new session after an expiry, register and
   elect again; back in the same session, take up what it still holds;
6. at shutdown, close the session, so the registration goes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from brook.storage.clock import Clock
from brook.storage.log_manager import generate_cluster_id

from ..config.broker_config import BrokerConfig
from ..metadata.cache import MetadataCache
from ..metadata.controller import Controller
from ..metadata.membership import ControllerListener, FencingListener
from ..metadata.publisher import MetadataPublisher
from ..metadata.records import RegisterBrokerRecord
from . import znodes
from .admin import ZkController
from .alter_partition import ZkAlterPartition
from .broker_watcher import BrokerWatcher
from .client import SessionState, ZooKeeperClient
from .connect_string import parse_connect_string
from .controller_duties import ControllerDuties
from .controller_election import ControllerElection, ControllerState
from .errors import BrokerIdRegisteredError, ClusterIdError
from .kazoo_api import (
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    WatchedEvent,
)
from .leadership_lease import LeadershipLease
from .producer_ids import ZkProducerIdManager
from .serial_job import SerialJob
from .store import ZkMetadataStore
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from ..groups.group_configs import GroupConfigs
    from ..quotas.manager import ClientQuotas
    from ..server.inter_broker import InterBrokerClients
    from .acl_store import ZkAclStore
    from .group_config_znodes import ZkGroupConfigStore
    from .quota_znodes import ZkClientQuotaStore
    from .scram_znodes import ZkScramCredentialStore

log = logging.getLogger("brook.zookeeper")

# ZooKeeper's default tickTime: a session expires up to one tick after its timeout.
ZOOKEEPER_TICK_MS = 2000
# Disconnected for this part of the session timeout, the broker acts as if its session
# had expired (it resigns as controller). kazoo notices a silent server after 2/3 of the
# timeout at the latest, and ZooKeeper expires a session one timeout after it last heard
# from it: so the broker steps down before ZooKeeper can hand its role to another.
PRESUME_LOST_AFTER = 0.25


class ZkMembership:
    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock,
        on_fatal: Callable[[int], None],
        features: Mapping[str, tuple[int, int]],
    ) -> None:
        self.connect = parse_connect_string(config["zookeeper.connect"])
        self._broker_id = config.broker_id
        self._session_timeout_ms: int = config["zookeeper.session.timeout.ms"]
        self._connection_timeout_ms: int = (
            config["zookeeper.connection.timeout.ms"] or self._session_timeout_ms
        )
        self._clock = clock
        self._on_fatal = on_fatal
        self._features = dict(features)
        self.client = ZooKeeperClient(
            self.connect, self._session_timeout_ms, asyncio.get_running_loop()
        )
        self.cluster_id: str | None = None
        self.election = ControllerElection(self.client, self._broker_id, clock)
        self.brokers: BrokerWatcher | None = None
        self._registration: RegisterBrokerRecord | None = None
        self._registration_gone = asyncio.Event()
        self._rejoin = SerialJob("registering again in a new session", self._register_again)
        self._presume_lost: asyncio.TimerHandle | None = None
        self._fencing_listeners: list[FencingListener] = []
        self.fenced = False
        self._update = SerialJob("updating the broker registration", self._update_registration)
        self._unfence = SerialJob("leading again in the same session", self._lead_again)
        self._config = config
        self.topics: TopicWatcher | None = None
        self.duties: ControllerDuties | None = None
        self.alter_partition: ZkAlterPartition | None = None
        self.broker_epoch = -1
        self.lease = LeadershipLease(
            lambda: self.client.negotiated_session_timeout_ms,
            lambda: self.client.exists(znodes.BROKER_IDS),
        )

    # --- what the broker reads ----------------------------------------------------------

    @property
    def controller_id(self) -> int:
        return self.election.state.controller_id

    @property
    def controller_epoch(self) -> int:
        return self.election.state.epoch

    @property
    def is_controller(self) -> bool:
        return self.election.is_controller

    async def broker_epoch_of(self, broker_id: int) -> int | None:
        """The epoch of a registered broker (its registration's czxid), None if it has none."""
        stat = await self.client.exists(znodes.broker_id_path(broker_id))
        return None if stat is None else stat.czxid

    def add_controller_listener(self, listener: ControllerListener) -> None:
        def forward(state: ControllerState, is_controller: bool) -> None:
            listener(state.controller_id, state.epoch, is_controller)

        self.election.add_listener(forward)

    def leadership_lease_held(self) -> bool:
        """Whether ZooKeeper answered lately enough that no other broker can lead what
        this one leads (checked by every append as leader, beside the partitions' fence)."""
        return self.lease.held()

    def add_fencing_listener(self, listener: FencingListener) -> None:
        self._fencing_listeners.append(listener)

    def _fence(self, fenced: bool) -> None:
        if fenced == self.fenced:
            return
        self.fenced = fenced
        if fenced:
            log.warning(
                "Broker %d stops leading its partitions until it is back in ZooKeeper",
                self._broker_id,
            )
        else:
            log.info("Broker %d is back in ZooKeeper and leads again", self._broker_id)
        for listener in self._fencing_listeners:
            listener(fenced)

    # --- start --------------------------------------------------------------------------

    async def start(self) -> None:
        """Steps 1-3; on failure the session is closed and the error raised."""
        connecting_since = time.monotonic()
        await self.client.start(self._connection_timeout_ms)
        self.lease.renewed(connecting_since)
        self.lease.start()
        try:
            log.info(
                "Connected to ZooKeeper at %s (session 0x%x, session timeout %d ms)",
                self.connect,
                self.client.session_id or 0,
                self.client.negotiated_session_timeout_ms,
            )
            if self.connect.chroot is not None:
                await self._make_chroot()
            await asyncio.gather(*(self._make_path(path) for path in znodes.PERSISTENT_PATHS))
            # From here on a session that expires is followed (register() may not have
            # run yet: then there is nothing to register again).
            self.client.add_session_listener(self._session_changed)
            self.cluster_id = await self._get_or_create_cluster_id()
            log.info("Cluster ID = %s", self.cluster_id)
            await self._wait_for_broker_id()
        except BaseException:
            await self.close()
            raise

    async def _make_chroot(self) -> None:
        """Kafka makes the chroot of zookeeper.connect where it is missing, through a
        session at the root (a session inside a missing chroot cannot make it)."""
        if await self.client.exists("/") is not None:
            return
        root = ZooKeeperClient(
            self.connect, self._session_timeout_ms, asyncio.get_running_loop(), chroot=False
        )
        await root.start(self._connection_timeout_ms)
        try:
            await self._make_path(self.connect.chroot or "/", root)
        finally:
            await root.close()
        log.info("Created zookeeper path %s", self.connect.chroot)

    async def _make_path(self, path: str, client: ZooKeeperClient | None = None) -> None:
        with contextlib.suppress(NodeExistsError):
            await (client or self.client).create(path, makepath=True)

    async def _get_or_create_cluster_id(self) -> str:
        """The id in /cluster/id; the first broker of a cluster makes it (Kafka's
        getOrGenerateClusterId: a new random id, never one from a log dir)."""
        try:
            data, _ = await self.client.get(znodes.CLUSTER_ID)
        except NoNodeError:
            proposed = generate_cluster_id()
            try:
                await self.client.create(
                    znodes.CLUSTER_ID, znodes.encode_cluster_id(proposed), makepath=True
                )
                return proposed
            except NodeExistsError:
                try:
                    data, _ = await self.client.get(znodes.CLUSTER_ID)
                except NoNodeError:
                    raise ClusterIdError(
                        "Failed to get cluster id from Zookeeper. This can happen if"
                        " /cluster/id is deleted from Zookeeper."
                    ) from None
        try:
            return znodes.decode_cluster_id(data)
        except ValueError as exc:
            raise ClusterIdError(str(exc)) from None

    async def _wait_for_broker_id(self) -> None:
        """Refuse a broker.id that another session holds, before any log is loaded.

        A broker killed without a clean stop leaves its registration until its session
        times out, and the broker restarted in its place would be refused (as Kafka
        refuses it). So a registration of another session is waited for, up to the
        session timeout (and ZooKeeper's tick): one of a dead broker goes meanwhile, one
        of a live broker does not, and the start is refused then.
        """
        path = znodes.broker_id_path(self._broker_id)
        loop = asyncio.get_running_loop()
        # The old session's timeout was granted as ours was (ZooKeeper bounds it).
        timeout_ms = max(self._session_timeout_ms, self.client.negotiated_session_timeout_ms)
        deadline = loop.time() + (timeout_ms + ZOOKEEPER_TICK_MS) / 1000
        waiting = False
        while True:
            self._registration_gone.clear()
            stat = await self.client.exists(path, self._registration_changed)
            if stat is None or stat.ephemeralOwner == self.client.session_id:
                if waiting:
                    log.info("%s is gone: registering broker %d", path, self._broker_id)
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise BrokerIdRegisteredError(self._taken_message(path, stat.ephemeralOwner))
            if not waiting:
                waiting = True
                log.warning(
                    "%s is registered by session 0x%x: waiting up to %d ms for it to go (a"
                    " broker with broker.id %d that stopped without closing its session), or"
                    " refusing to start if another live broker holds it",
                    path,
                    stat.ephemeralOwner,
                    remaining * 1000,
                    self._broker_id,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._registration_gone.wait(), remaining)

    def _registration_changed(self, event: WatchedEvent) -> None:
        self._registration_gone.set()

    def _taken_message(self, path: str, owner: int) -> str:
        # Kafka's words (KafkaZkClient's CheckedEphemeral), then what they mean.
        return (
            f"Error while creating ephemeral at {path}, node already exists and owner"
            f" '{owner}' does not match current session '{self.client.session_id}':"
            f" another live broker is registered with broker.id {self._broker_id}"
        )

    # --- metadata -----------------------------------------------------------------------

    async def metadata_store(self, log_dir: object) -> ZkMetadataStore:
        """ZooKeeper is the store; the topic configs are read for the logs to open with."""
        return await ZkMetadataStore.read(self.client)

    def prepare_metadata(self, cache: MetadataCache) -> None:
        """Before any partition is made: the ISR changes of leaders go to ZooKeeper."""
        self.topics = TopicWatcher(self.client, cache, None)
        self.alter_partition = ZkAlterPartition(self.client, self.topics)

    async def load_metadata(
        self,
        cache: MetadataCache,
        publisher: MetadataPublisher,
        config: Callable[[], BrokerConfig],
    ) -> None:
        """Every topic, partition state and topic config, before the listeners bind; from
        then on their watches; and the controller's duties for when this broker wins."""
        if self.topics is None:
            self.prepare_metadata(cache)
        assert self.topics is not None
        self.topics.publisher = publisher
        await self.topics.start()
        self.duties = ControllerDuties(self.client, self.election, self.topics, cache, config)
        publisher.listeners.append(self.duties.metadata_changed)

    def make_controller(
        self,
        broker_id: int,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        publisher: MetadataPublisher,
    ) -> Controller:
        return ZkController(broker_id, config, cache, publisher, self.client)

    async def producer_id_manager(self, log_dir: object) -> ZkProducerIdManager:
        manager = ZkProducerIdManager(self.client, self._broker_id)
        await manager.start()
        return manager

    def scram_credential_store(self, log_dir: object) -> ZkScramCredentialStore:
        from .scram_znodes import ZkScramCredentialStore

        return ZkScramCredentialStore(self.client)

    def client_quota_store(self, log_dir: object, quotas: ClientQuotas) -> ZkClientQuotaStore:
        from .quota_znodes import ZkClientQuotaStore

        return ZkClientQuotaStore(self.client, quotas)

    def group_config_store(self, log_dir: object, configs: GroupConfigs) -> ZkGroupConfigStore:
        from .group_config_znodes import ZkGroupConfigStore

        return ZkGroupConfigStore(self.client, configs)

    def acl_store(self, log_dir: object) -> ZkAclStore:
        """Kafka's /kafka-acl, read again whole in each new session (a change notified
        while the session was lost would be missed otherwise)."""
        from .acl_store import ZkAclStore

        store = ZkAclStore(self.client)
        self.client.add_session_listener(
            lambda state, new_session: (
                store.resync() if state is SessionState.CONNECTED and new_session else None
            )
        )
        return store

    # --- registration -------------------------------------------------------------------

    async def register(self, publisher: MetadataPublisher, broker: RegisterBrokerRecord) -> None:
        """Step 4, once the listeners are bound (their ports are in the registration)."""
        self._registration = broker
        # Clients may ask already: Metadata lists this broker from the start, as it
        # lists the others once the watch has read them.
        publisher.apply([broker])
        await self._create_registration()
        self.brokers = BrokerWatcher(self.client, publisher)
        await self.brokers.start()
        await self.election.start()
        await self._read_broker_epoch()

    async def _read_broker_epoch(self) -> None:
        """The broker epoch is the registration's creation zxid (Kafka's, KIP-380): each
        incarnation of a broker id has a higher one. Read once the election has started,
        so that it delays nothing a client waits for; only a controlled shutdown needs it."""
        stat = await self.client.exists(znodes.broker_id_path(self._broker_id))
        if stat is not None and stat.ephemeralOwner == self.client.session_id:
            self.broker_epoch = stat.czxid

    async def _create_registration(self) -> None:
        """Kafka's checked ephemeral create: a node already there is ours only if our
        own session owns it (a create retried after a lost connection)."""
        assert self._registration is not None
        path = znodes.broker_id_path(self._broker_id)
        data = znodes.encode_broker(self._registration, self._clock(), self._features)
        while True:
            try:
                await self.client.create(path, data, ephemeral=True)
                break
            except NodeExistsError:
                try:
                    _, stat = await self.client.get(path)
                except NoNodeError:
                    continue  # went while we read it: create again
                if stat.ephemeralOwner == self.client.session_id:
                    break
                raise BrokerIdRegisteredError(
                    self._taken_message(path, stat.ephemeralOwner)
                ) from None
        log.info(
            "Registered broker %d at path %s with addresses: %s",
            self._broker_id,
            path,
            ",".join(znodes.connection_string(e) for e in self._registration.endpoints),
        )

    def update_registration(self, broker: RegisterBrokerRecord) -> None:
        if self._registration is not None and self._registration.in_controlled_shutdown:
            broker = broker._replace(in_controlled_shutdown=True)  # a stop is not undone
        self._registration = broker
        self._update.schedule()

    async def _update_registration(self) -> None:
        assert self._registration is not None
        path = znodes.broker_id_path(self._broker_id)
        data = znodes.encode_broker(self._registration, self._clock(), self._features)
        await self.client.set(path, data)
        log.info(
            "Updated broker %d at path %s with addresses: %s%s",
            self._broker_id,
            path,
            ",".join(znodes.connection_string(e) for e in self._registration.endpoints),
            " (in controlled shutdown)" if self._registration.in_controlled_shutdown else "",
        )

    # --- sessions -----------------------------------------------------------------------

    def _session_changed(self, state: SessionState, new_session: bool) -> None:
        if self._presume_lost is not None:
            self._presume_lost.cancel()
            self._presume_lost = None
        if state is SessionState.LOST:
            # Our /controller and /brokers/ids/<id> went with the session.
            self.election.session_lost()
            self._fence(True)
        elif state is SessionState.SUSPENDED:
            delay_s = self.client.negotiated_session_timeout_ms * PRESUME_LOST_AFTER / 1000
            self._presume_lost = asyncio.get_running_loop().call_later(
                delay_s, self._session_presumed_lost, delay_s
            )
        elif new_session:
            self._rejoin.schedule()
        elif self._registration is not None:
            # The same session: what we held is ours still; the election reads it again.
            self.election.schedule()
            self._unfence.schedule()

    async def _lead_again(self) -> None:
        """Take writes as a leader again once the lease is renewed by a request sent now."""
        try:
            await self.lease.renew_now()
        except (ConnectionLoss, SessionExpiredError):
            return  # cut off again: the next reconnection tries again
        if self.client.connected:
            self._fence(False)

    def _session_presumed_lost(self, delay_s: float) -> None:
        self._presume_lost = None
        if self.election.is_controller:
            log.warning(
                "No ZooKeeper for %d ms: acting as if the session had expired, before"
                " ZooKeeper can expire it and another broker take over",
                delay_s * 1000,
            )
        self.election.session_lost()
        # A partition leader steps down as early: another broker may lead its
        # partitions once the session expires.
        self._fence(True)

    async def _register_again(self) -> None:
        if self._registration is None:
            return  # not registered yet: register() does it in this session
        log.info(
            "New ZooKeeper session 0x%x: registering broker %d again",
            self.client.session_id or 0,
            self._broker_id,
        )
        try:
            await self._create_registration()
        except BrokerIdRegisteredError as exc:
            # Another broker took our id while our session was gone: two brokers with
            # one id cannot both serve; this one stops.
            log.error("%s; shutting down", exc)
            self._on_fatal(1)
            return
        if self.brokers is not None:
            self.brokers.schedule()
        if self.topics is not None:
            # Leadership moved while the session was gone: the partitions learn who leads
            # now before this broker takes writes as a leader again.
            self.topics.resync()
            await self.topics.idle()
        self.election.schedule()
        await self._lead_again()
        await self._read_broker_epoch()

    # --- stop ---------------------------------------------------------------------------

    async def controlled_shutdown(
        self,
        config: BrokerConfig,
        inter_broker: InterBrokerClients,
        stop_fetching: Callable[[], Awaitable[None]],
    ) -> None:
        # Skipped after a lost session: the controller would not know this broker anyway.
        if not config["controlled.shutdown.enable"] or self.fenced:
            return
        from ..server.controlled_shutdown import controlled_shutdown

        # First every leader learns, from this registration, that this broker stops
        # (KRaft's inControlledShutdown): they take it into no ISR (KIP-841). It goes on
        # fetching while the controller takes it out of each ISR, so that an acks=all
        # producer never waits on a follower that stopped, only until the controller
        # reaches its partition; it stops fetching once the controller is done.
        if self._registration is not None:
            self.update_registration(self._registration._replace(in_controlled_shutdown=True))
            await self._update.idle()
        try:
            await controlled_shutdown(self._broker_id, config, self, inter_broker)
        finally:
            await stop_fetching()

    async def close(self) -> None:
        if self._presume_lost is not None:
            self._presume_lost.cancel()
        for job in (self._rejoin, self._update, self._unfence):
            job.close()
        await self.lease.close()
        self.election.close()
        if self.duties is not None:
            self.duties.close()
        if self.topics is not None:
            self.topics.close()
        if self.brokers is not None:
            self.brokers.close()
        await self.client.close()
        log.info("Closed the ZooKeeper session")
