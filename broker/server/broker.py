"""The broker: owns all state on one event loop and serves every listener."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook.storage import idle_files
from brook.storage.clock import Clock, system_clock
from brook.storage.log_manager import LogManager, prepare_log_dirs

from ..config.broker_config import BrokerConfig, Listener
from ..config.dynamic import DynamicBrokerConfig
from ..faults import FaultRegistry
from ..metadata.cache import MetadataCache
from ..metadata.membership import (
    LocalMembership,
    Membership,
    broker_registration,
    membership_for,
)
from ..metadata.publisher import MetadataPublisher
from ..metadata.records import RegisterBrokerRecord
from ..observability.broker_state import BrokerState
from ..replica.fetch_sessions import FetchSessionCache
from ..replica.replica_manager import ReplicaManager
from .broker_parts import build_broker_parts
from .collector_policy import CollectorPolicy
from .connection import KafkaConnection
from .features import features_of
from .listeners import ListenerManager
from .listeners import describe as describe_listeners
from .open_files import raise_open_file_limit
from .services import BrokerServices

if TYPE_CHECKING:
    import ssl

    from brook.storage.log_cleaner_manager import LogCleanerManager

    from ..authorizer.operations import AclOperation
    from ..groups.coordinator import GroupCoordinator
    from ..observability.loop_lag import LoopLagMonitor
    from ..observability.request_metrics import RequestMetrics
    from ..replica.log_cleaner import LogCleaner
    from ..security.scram import ScramCredential
    from ..transactions.coordinator import TransactionCoordinator
    from .admin_auth import AdminAuthenticator
    from .admin_server import AdminServer

log = logging.getLogger("brook.broker")

SHUTDOWN_GRACE_S = 5.0
PURGE_INTERVAL_MS = 1000
# At least this often the flusher looks for rolled segments to sync.
FLUSH_CHECK_MS = 1000


class Broker:
    """One broker: its listeners, the parts `build_broker_parts` makes at start (reached
    as `services`), the log cleaner and the background loops."""

    def __init__(self, config: BrokerConfig, clock: Clock = system_clock) -> None:
        # Static, then from start() on with the dynamic configs; `config` is the one in
        # force (AlterConfigs replaces it), so read it where a value is needed.
        self.dynamic_config = DynamicBrokerConfig(config)
        # Wall-clock milliseconds for record semantics (timestamp validation,
        # LogAppendTime) and for the storage it owns (segment ages, retention, flushes,
        # delayed deletes); tests pass their own clock to probe exact bounds.
        self.clock = clock
        self.broker_id = config.broker_id
        self.connections: set[KafkaConnection] = set()
        self.faults = FaultRegistry(clock, enabled=config["admin.fault.injection.enable"])
        self.admin: AdminServer | None = None
        # Kafka's BrokerState, which /metrics and /v1/ready report.
        self.state = BrokerState.NOT_RUNNING
        # With the admin endpoint on: what /metrics counts of requests and the loop.
        self.request_metrics: RequestMetrics | None = None
        self.loop_lag: LoopLagMonitor | None = None
        # Connections accepted so far, per listener (socket-server-metrics).
        self.connections_accepted: dict[str, int] = {}
        self.listeners = ListenerManager(self._new_connection)
        self.background: list[asyncio.Task[Any]] = []
        # What survives a full garbage collection is frozen (collector_policy.py).
        self.collector_policy: CollectorPolicy | None = None
        # Retention passes run so far: what a test waits on instead of sleeping.
        self.retention_checks = 0
        # The log cleaner's threads, when log.cleaner.enable.
        self.cleaner: LogCleaner | None = None
        # The GIL's switch interval while a cleaning runs: set when the process is the
        # broker's alone (`brook serve`); a broker inside another program (the pytest
        # plugin) leaves that program's interpreter as it is.
        self.cleaner_switch_interval: float | None = None
        # The cluster: ZooKeeper's (zookeeper.connect), or this broker alone; made at
        # start (a ZooKeeper session needs the running loop).
        self.membership: Membership = LocalMembership(self.broker_id)
        # Everything the request handlers use, once start() has built it.
        self._services: BrokerServices | None = None
        self.started = asyncio.Event()
        self.stopping = False
        # Set by a signal, a test, or the broker itself when it cannot go on (every log
        # dir offline); whoever runs the broker awaits it, then calls stop().
        self.stop_requested = asyncio.Event()
        self.exit_code = 0

    @property
    def config(self) -> BrokerConfig:
        return self.dynamic_config.current

    @property
    def services(self) -> BrokerServices:
        """The broker's parts (built by start())."""
        assert self._services is not None, "the broker has not started"
        return self._services

    # What tests and tools read of the parts, by the names Kafka's KafkaServer uses.

    @property
    def log_manager(self) -> LogManager:
        return self.services.log_manager

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def metadata(self) -> MetadataCache:
        return self.services.metadata

    @property
    def metadata_publisher(self) -> MetadataPublisher:
        return self.services.metadata_publisher

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        return self.services.fetch_sessions

    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id

    @property
    def groups(self) -> GroupCoordinator:
        return self.services.groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.services.transactions

    @property
    def log_cleaner(self) -> LogCleanerManager:
        """The cleaner's bookkeeping: logs cleaned so far (what a test waits on), the
        cleaner checkpoints."""
        assert self.cleaner is not None, "log.cleaner.enable is false"
        return self.cleaner.manager

    @property
    def parked_fetches(self) -> set[asyncio.Future[None]]:
        return self.services.fetch_purgatory.parked

    @property
    def bound(self) -> list[Listener]:
        """The listeners with their real ports (port 0 resolved)."""
        return self.listeners.bound

    @property
    def advertised(self) -> list[Listener]:
        """The advertised listeners, with ports resolved where a listener asked for 0."""
        return self.listeners.advertised()

    @property
    def is_controller(self) -> bool:
        return self.membership.is_controller

    @property
    def controller_id(self) -> int:
        """The elected controller's id (-1 while none is known)."""
        return self.membership.controller_id

    @property
    def controller_epoch(self) -> int:
        return self.membership.controller_epoch

    def _new_connection(self, listener_name: str) -> KafkaConnection:
        accepted = self.connections_accepted
        accepted[listener_name] = accepted.get(listener_name, 0) + 1
        return KafkaConnection(self.services, self.connections, listener_name)

    async def start(self) -> None:
        started = time.monotonic()
        self.state = BrokerState.STARTING
        raise_open_file_limit()
        self.collector_policy = CollectorPolicy(asyncio.get_running_loop())
        self.collector_policy.start()
        static = self.dynamic_config.static
        if static["admin.listener"]:
            # First, so that /v1/health and /v1/ready answer while the broker starts.
            self._start_admin(static["admin.listener"])
        try:
            self.membership = membership_for(
                static,
                self.clock,
                self.request_stop,
                {
                    feature.name: (feature.min_version, feature.max_version)
                    for feature in features_of(static["brook.emulate.release"])
                },
            )
            await self.membership.start()
            await self._start(started)
        except BaseException:
            # Leave ZooKeeper at once: a registration made goes with the session.
            await self.membership.close()
            if self.admin is not None:
                await asyncio.to_thread(self.admin.stop)
            if self.loop_lag is not None:
                self.loop_lag.stop()
            raise

    def _start_admin(self, url: str) -> None:
        """The admin endpoint: faults, /metrics, /v1/health, /v1/ready (imported only
        when asked for: prometheus-client costs start-up time)."""
        from ..observability.collector import BrokerView
        from ..observability.loop_lag import LoopLagMonitor
        from ..observability.request_metrics import RequestMetrics
        from .admin_server import AdminServer

        self.request_metrics = RequestMetrics()
        self.loop_lag = LoopLagMonitor()
        view = BrokerView(
            broker_id=self.broker_id,
            services=lambda: self.services if self.started.is_set() else None,
            connections=self.connections,
            accepted=self.connections_accepted,
            request_metrics=self.request_metrics,
            loop_lag=self.loop_lag,
            state=lambda: self.state,
        )
        self.admin = AdminServer(
            url,
            asyncio.get_running_loop(),
            self.faults,
            view,
            self._admin_authenticator(),
            self._admin_tls(url),
        )
        self.admin.start()
        self.loop_lag.start()

    def _admin_authenticator(self) -> AdminAuthenticator:
        """The admin endpoint's checks, against the broker's users and ACLs once it runs
        (while it starts, only a token passes)."""
        from ..authorizer.acl import CLUSTER_NAME, ResourceType
        from .admin_auth import AdminAuthenticator
        from .admin_server import CALL_TIMEOUT_S as ADMIN_CALL_TIMEOUT_S

        config = self.dynamic_config.static
        loop = asyncio.get_running_loop()

        def scram_credential(user: str, mechanism: str) -> ScramCredential | None:
            if not self.started.is_set():
                return None
            reading = self.services.scram_credentials.get(user, mechanism)
            return asyncio.run_coroutine_threadsafe(reading, loop).result(ADMIN_CALL_TIMEOUT_S)

        def authorize(principal: str, host: str, operation: AclOperation) -> bool:
            if not self.started.is_set():
                return False

            async def ask() -> bool:
                authorizer = self.services.authorizer
                return authorizer is None or bool(
                    authorizer.authorize(
                        principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME
                    )
                )

            return asyncio.run_coroutine_threadsafe(ask(), loop).result(ADMIN_CALL_TIMEOUT_S)

        has_authorizer = bool(config["authorizer.class.name"])
        return AdminAuthenticator(config, scram_credential, authorize if has_authorizer else None)

    def _admin_tls(self, url: str) -> ssl.SSLContext | None:
        """https: the broker's key store (listener.name.admin.ssl.* over ssl.*)."""
        from .admin_server import is_https

        if not is_https(url):
            return None
        from ..security.tls import server_context

        return server_context(self.dynamic_config.static, "ADMIN")

    async def _start(self, started: float) -> None:
        # Before anything reads a file in them: a log dir that is a file or cannot be
        # made stops the start with an error naming it.
        prepare_log_dirs(self.dynamic_config.static.log_dirs)
        # Segment files this loop opens are closed when idle (_idle_file_loop).
        idle_files.sweep_this_thread()
        self._services = await build_broker_parts(
            self.dynamic_config,
            self.membership,
            self.clock,
            self.faults,
            self.listeners,
            self.request_metrics,
            self._on_every_log_dir_failed,
        )
        config = self.config
        await self.listeners.start(config)
        self.dynamic_config.reconfigurables.append(self.listeners.reconfigure)
        # Alive at the endpoints just bound: in ZooKeeper, or in this broker's own cache.
        await self.membership.register(self.metadata_publisher, self._registration())
        self.listeners.on_reconfigured.append(
            lambda: self.membership.update_registration(self._registration())
        )
        if config.controller_listeners:
            log.info(
                "Not listening on %s: controller.listener.names names it, and Brook runs no"
                " KRaft controller (Kafka serves no client there either)",
                describe_listeners(config.controller_listeners),
            )
        where = describe_listeners(self.bound)
        advertised = describe_listeners(self.advertised)
        log.info(
            "Brook broker %d listening on %s (advertised %s), data in %s, cluster %s,"
            " started in %.0f ms",
            self.broker_id,
            where,
            advertised,
            ",".join(str(d) for d in self.config.log_dirs),
            self.cluster_id,
            (time.monotonic() - started) * 1000,
        )
        self.background.append(asyncio.create_task(self._checkpoint_loop()))
        self.background.append(asyncio.create_task(self._high_watermark_checkpoint_loop()))
        self.background.append(asyncio.create_task(self._flush_loop()))
        self.background.append(asyncio.create_task(self._retention_loop()))
        self.background.append(asyncio.create_task(self._producer_expiration_loop()))
        self.background.append(asyncio.create_task(self._isr_expiration_loop()))
        self.background.append(asyncio.create_task(self._idle_file_loop()))
        # Every topic's logs follow the broker's new defaults, then the cleaner looks
        # whether one of them is compacted now.
        self.dynamic_config.reconfigurables.append(
            lambda *_: self.replicas.refresh_configs(
                (topic.name, topic.configs) for topic in self.metadata.topics()
            )
        )
        self._maybe_start_cleaner()
        self.metadata_publisher.listeners.append(lambda _: self._maybe_start_cleaner())
        self.dynamic_config.reconfigurables.append(lambda *_: self._maybe_start_cleaner())
        self.started.set()
        self.state = BrokerState.RUNNING

    def _maybe_start_cleaner(self) -> None:
        """Start the log cleaner's threads with the first compacted log (at start, or when
        a topic is created or altered to compact, or the broker's default policy changes).

        Kafka starts them with the broker; until a log is compacted they have nothing to
        do, and cost a thread and the cleaner's modules (about 1.3 MB of an idle broker)."""
        if self.cleaner is not None or not self.config["log.cleaner.enable"]:
            return
        if not any(log_.config.compact for log_ in self.log_manager.all_logs()):
            return
        from ..replica.log_cleaner import LogCleaner

        self.cleaner = LogCleaner(
            self.log_manager,
            lambda: self.config,
            self.clock,
            switch_interval_while_cleaning=self.cleaner_switch_interval,
        )
        self.cleaner.start()
        self.dynamic_config.reconfigurables.append(self.cleaner.reconfigure)

    def request_stop(self, exit_code: int = 0) -> None:
        """Ask whoever runs the broker to stop it; the first exit code asked for wins."""
        if not self.stop_requested.is_set():
            self.exit_code = exit_code
            self.stop_requested.set()

    def _on_every_log_dir_failed(self, log_dirs: list[Path]) -> None:
        # As Kafka: a broker with no usable log dir cannot serve anything; stop, and
        # let the next start recover the dirs (none of them gets the clean marker).
        log.error(
            "Shutting down broker %d because all log dirs in %s have failed",
            self.broker_id,
            ", ".join(str(d) for d in log_dirs),
        )
        self.request_stop(1)

    async def stop(self) -> None:
        """Stop accepting, answer what is in flight, flush and checkpoint the logs."""
        log.info("Shutting down broker %d", self.broker_id)
        self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        await self._controlled_shutdown()
        self.state = BrokerState.SHUTTING_DOWN
        self.listeners.close()
        if self.admin is not None:
            await asyncio.to_thread(self.admin.stop)
        if self.loop_lag is not None:
            self.loop_lag.stop()
        for task in self.background:
            task.cancel()
        self.stopping = True
        if self.replicas.fetchers is not None:
            await self.replicas.fetchers.shutdown()
        await self.services.inter_broker.close()
        self.services.fetch_purgatory.close()
        in_flight = [c.in_flight for c in self.connections if c.in_flight is not None]
        if in_flight:
            await asyncio.wait(in_flight, timeout=SHUTDOWN_GRACE_S)
        for connection in list(self.connections):
            connection.close()
        await self.listeners.wait_closed()
        if self.cleaner is not None:
            # A cleaning under way stops at its next segment and leaves no file behind.
            await self.cleaner.stop()
        self.services.coordinators.stop()
        self.services.log_dir_mover.stop()
        self.log_manager.shutdown()
        if self.services.acl_store is not None:
            self.services.acl_store.close()
        self.services.quota_store.close()
        self.services.group_config_store.close()
        # Last, as Kafka closes its ZooKeeper client: the registration goes with it.
        await self.membership.close()
        if self.collector_policy is not None:
            self.collector_policy.stop()
        self.state = BrokerState.NOT_RUNNING
        log.info("Broker %d stopped cleanly", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Hand this broker's leaders over while its listeners still answer (the
        membership decides whether there is anyone to hand them to)."""
        if self._services is None:
            return  # the broker never finished starting

        async def stop_fetching() -> None:
            # Once the controller has taken this broker out of every ISR: until then
            # acks=all producers wait on its fetches (ZkMembership.controlled_shutdown).
            fetchers, self.replicas.fetchers = self.replicas.fetchers, None
            if fetchers is not None:
                await fetchers.shutdown()

        self.replicas.in_controlled_shutdown = True
        await self.membership.controlled_shutdown(
            self.config, self.services.inter_broker, stop_fetching
        )

    def _registration(self) -> RegisterBrokerRecord:
        config = self.config
        return broker_registration(
            self.broker_id,
            self.advertised,
            config.listener_security_protocols,
            config["broker.rack"],
        )

    async def _checkpoint_loop(self) -> None:
        interval_s = max(self.config["log.flush.offset.checkpoint.interval.ms"], 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            # A file error here (and in the loops below) is the log manager's to handle:
            # it logs it, or takes the dir offline, and the next round tries again.
            self.log_manager.checkpoint_recovery_points_and_log_start_offsets()

    async def _high_watermark_checkpoint_loop(self) -> None:
        """Kafka's highwatermark-checkpoint task: a restarted broker starts each partition
        from the high watermark it last knew, not from the log start."""
        interval_s = max(self.config["replica.high.watermark.checkpoint.interval.ms"], 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            self.log_manager.checkpoint_high_watermarks()

    async def _retention_loop(self) -> None:
        """Delete segments past retention.ms / retention.bytes, as Kafka's log cleaner
        thread for deletion does every log.retention.check.interval.ms."""
        interval_ms = self.config["log.retention.check.interval.ms"]
        next_check = self.clock() + interval_ms
        while True:
            # Wake at least every second to remove files whose file.delete.delay.ms
            # has passed; retention itself runs on its own interval.
            await asyncio.sleep(min(interval_ms, PURGE_INTERVAL_MS) / 1000)
            now = self.clock()
            if now >= next_check:
                deleted = self.log_manager.delete_old_segments(now)
                if deleted:
                    log.info("Retention deleted %d segment(s)", deleted)
                self.retention_checks += 1
                next_check = now + interval_ms
            self.log_manager.purge_deleted_segments(now)

    async def _producer_expiration_loop(self) -> None:
        """Kafka's PeriodicProducerExpirationCheck: forget producer ids idle for longer
        than producer.id.expiration.ms (dynamic: the value in force is passed each time)."""
        interval_s = self.config["producer.id.expiration.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval_s)
            self.log_manager.remove_expired_producers(
                self.clock(), self.config["producer.id.expiration.ms"]
            )

    async def _isr_expiration_loop(self) -> None:
        """Kafka's isr-expiration task: every half of replica.lag.time.max.ms, the
        partitions led here drop the followers that have not caught up for that long."""
        while True:
            lag_time_max_ms = self.config["replica.lag.time.max.ms"]
            await asyncio.sleep(lag_time_max_ms / 2 / 1000)
            self.replicas.maybe_shrink_isr(lag_time_max_ms)

    async def _idle_file_loop(self) -> None:
        """Close the descriptors of segment files unused for brook.log.file.idle.close.ms
        (storage/idle_files.py): a file is closed at the second look that finds it
        unused, so each look comes after half that time."""
        while True:
            await asyncio.sleep(self.config["brook.log.file.idle.close.ms"] / 2 / 1000)
            closed = idle_files.close_idle()
            if closed:
                log.debug("Closed %d idle segment file(s)", closed)

    async def _flush_loop(self) -> None:
        """fsync what flush.messages/flush.ms ask for, and the segments left behind by a
        roll (as Kafka schedules after each roll), which moves the recovery point on and
        keeps recovery after a crash short. The fsyncs run on the event loop: they touch
        only closed segments or what the operator asked to be synced."""
        interval_ms = min(self.config["log.flush.scheduler.interval.ms"], FLUSH_CHECK_MS)
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            self.log_manager.flush_dirty_logs(self.clock())
