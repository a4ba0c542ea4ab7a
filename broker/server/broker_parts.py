"""The broker's parts, built in one step: from the log dirs and the membership (a single
broker's own, or ZooKeeper's) to the `BrokerServices` every request handler works with.

Kafka's KafkaServer.startup makes its managers in one sequence, each from those made
before it; this is that sequence. What it returns is whole: nothing is wired in after
construction, and the broker holds only the result. The order matters and is Kafka's:
the logs are recovered before any partition is made, the metadata is loaded before the
controller and the coordinators are, and the coordinators exist before the first
leadership change of an internal topic reaches them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook.storage.clock import Clock
from brook.storage.errors import InconsistentClusterIdError
from brook.storage.log_manager import LogManager
from brook.storage.producer_state_config import ProducerStateManagerConfig

from ..config.broker_config import BrokerConfig
from ..config.dynamic import DynamicBrokerConfig
from ..config.topic_config import log_config_for
from ..coordinator.coordinators import CoordinatorParts, Coordinators
from ..faults import FaultRegistry
from ..metadata.cache import INTERNAL_TOPICS, MetadataCache
from ..metadata.controller import Controller, partitions
from ..metadata.membership import Membership, ProducerIds
from ..metadata.publisher import MetadataPublisher
from ..replica.fetch_purgatory import FetchPurgatory
from ..replica.fetch_sessions import FetchSessionCache
from ..replica.log_dir_mover import LogDirMover
from ..replica.replica_manager import ReplicaManager
from ..replication.fetcher_manager import ReplicaFetcherManager
from ..share.share_partitions import SharePartitions
from .api_version_manager import ApiVersionManager
from .inter_broker import InterBrokerClients
from .listeners import ListenerManager
from .services import BrokerServices

if TYPE_CHECKING:
    from brook.storage.log_config import LogConfig

    from ..authorizer.authorizer import Authorizer
    from ..authorizer.store import AclStore
    from ..groups.group_config_store import GroupConfigStore
    from ..groups.group_configs import GroupConfigs
    from ..observability.request_metrics import RequestMetrics
    from ..quotas.manager import ClientQuotas
    from ..quotas.store import ClientQuotaStore
    from ..replica.partition import Partition
    from ..share.persister import CoordinatorPersister
    from ..share.share_partition_manager import SharePartitionManager

log = logging.getLogger("brook.broker")


async def build_broker_parts(
    dynamic_config: DynamicBrokerConfig,
    membership: Membership,
    clock: Clock,
    faults: FaultRegistry,
    listeners: ListenerManager,
    request_metrics: RequestMetrics | None,
    on_every_log_dir_failed: Callable[[list[Path]], None],
) -> BrokerServices:
    """Recover the logs, load the metadata and make every manager a handler uses.

    `membership` has joined its cluster (Membership.start); the listeners are not bound
    yet (the broker binds them once this returns)."""
    config = dynamic_config.load()
    broker_id = config.broker_id

    def current_config() -> BrokerConfig:
        return dynamic_config.current

    def topic_log_config(overrides: dict[str, Any]) -> LogConfig:
        """A topic's log config: its overrides over the broker's defaults in force."""
        return log_config_for(dynamic_config.current, overrides)

    store = await membership.metadata_store(config.log_dirs[0])
    stored_configs = store.topic_configs()
    log_manager = _recovered_logs(
        config,
        membership.cluster_id,
        clock,
        lambda topic: topic_log_config(stored_configs.get(topic, {})),
        on_every_log_dir_failed,
    )
    metadata = MetadataCache()
    membership.prepare_metadata(metadata)
    replicas = ReplicaManager(
        broker_id,
        log_manager,
        topic_log_config,
        clock,
        lambda other: metadata.broker(other) is not None,
        faults,
        # Fetchers start only for partitions another broker leads (never on a single
        # broker, which leads them all).
        fetchers=ReplicaFetcherManager(broker_id, metadata, current_config),
        alter_partition=membership.alter_partition,
        leadership_lease=membership.leadership_lease_held,
        isr_eligible=metadata.isr_eligible,
    )
    # A leader cut off from its cluster stops before another broker is elected.
    membership.add_fencing_listener(replicas.set_fenced)
    # Every metadata change from here on goes through this one publisher.
    publisher = MetadataPublisher(metadata, store, replicas)
    publisher.apply(store.load(log_manager.all_logs()))
    await membership.load_metadata(metadata, publisher, current_config)
    if len(metadata):
        topics = len(metadata)
        log.info(
            "Loaded %d topic%s with %s",
            topics,
            "" if topics == 1 else "s",
            partitions(len(replicas.partitions())),
        )
    controller = membership.make_controller(broker_id, current_config, metadata, publisher)
    producer_ids = await membership.producer_id_manager(config.log_dirs[0])
    inter_broker = InterBrokerClients(broker_id, metadata, current_config)
    group_configs, group_config_store = await _group_configs(config, current_config, membership)
    coordinators = _coordinators(
        current_config,
        clock,
        metadata,
        controller,
        replicas,
        producer_ids,
        inter_broker,
        group_configs,
    )

    def make_share_persister() -> CoordinatorPersister:
        from ..share.persister import CoordinatorPersister

        return CoordinatorPersister(coordinators, metadata, broker_id, inter_broker)

    def make_share_partitions(persister: CoordinatorPersister) -> SharePartitionManager:
        from ..share.share_partition_manager import SharePartitionManager

        return SharePartitionManager(
            current_config, metadata, replicas, group_configs, persister, clock
        )

    share_partitions = SharePartitions(make_share_partitions, make_share_persister)
    if any(metadata.get(name) for name in INTERNAL_TOPICS):
        await coordinators.start()

    def on_leadership_change(partition: Partition) -> None:
        if partition.leader_id != broker_id:
            share_partitions.on_leadership_lost(partition.topic, partition.index)
        # From here on, a partition of an internal topic that changes hands here is
        # loaded or dropped by its coordinator.
        if partition.topic in INTERNAL_TOPICS:
            coordinators.on_leadership_change(
                partition.topic,
                partition.index,
                leads=partition.leader_id == broker_id,
                empty=partition.log_end_offset == partition.log_start_offset,
            )

    replicas.leadership_listeners.append(on_leadership_change)
    authorizer, acl_store = await _authorizer(config, membership)
    quotas, quota_store = await _client_quotas(config, membership)
    services = BrokerServices(
        broker_id=broker_id,
        clock=clock,
        dynamic_config=dynamic_config,
        metadata=metadata,
        metadata_publisher=publisher,
        replicas=replicas,
        controller=controller,
        coordinators=coordinators,
        producer_ids=producer_ids,
        fetch_sessions=FetchSessionCache(),
        fetch_purgatory=FetchPurgatory(),
        log_manager=log_manager,
        log_dir_mover=LogDirMover(log_manager, replicas.hosted),
        cluster_id=log_manager.cluster_id or "",
        listeners=listeners,
        membership=membership,
        inter_broker=inter_broker,
        faults=faults,
        api_versions=ApiVersionManager.of(
            config["brook.emulate.release"], config["group.coordinator.rebalance.protocols"]
        ),
        scram_credentials=membership.scram_credential_store(config.log_dirs[0]),
        scram_decoy_key=os.urandom(32),
        authorizer=authorizer,
        acl_store=acl_store,
        quotas=quotas,
        quota_store=quota_store,
        group_configs=group_configs,
        group_config_store=group_config_store,
        share_partitions=share_partitions,
        request_metrics=request_metrics,
    )
    if services.api_versions.release is not None:
        log.info(
            "Emulating Apache Kafka %s: ApiVersions advertises its version ranges (where"
            " Brook serves them), and other versions are refused as that release refuses them",
            services.api_versions.release,
        )
    return services


def _recovered_logs(
    config: BrokerConfig,
    cluster_id: str | None,
    clock: Clock,
    default_config: Callable[[str], LogConfig],
    on_every_log_dir_failed: Callable[[list[Path]], None],
) -> LogManager:
    """The log dirs, recovered; `cluster_id` is the membership's (ZooKeeper's /cluster/id),
    and a log dir of another cluster is refused. A dir that fails from recovery on is
    taken offline; when none is left, `on_every_log_dir_failed` is told."""
    log_manager = LogManager(
        config.log_dirs,
        broker_id=config.broker_id,
        cluster_id=cluster_id,
        default_config_factory=default_config,
        clock=clock,
        producer_state_config=ProducerStateManagerConfig(config["producer.id.expiration.ms"]),
    )

    def on_log_dir_failure(_: Path) -> None:
        if not log_manager.online_dirs:
            on_every_log_dir_failed(list(log_manager.log_dirs))

    log_manager.failure_channel.add_listener(on_log_dir_failure)
    try:
        log_manager.startup()
    except InconsistentClusterIdError as exc:
        if cluster_id is None:
            raise
        message = f"{exc} Configured zookeeper.connect may be wrong."
        raise InconsistentClusterIdError(message) from None
    return log_manager


def _coordinators(
    current_config: Callable[[], BrokerConfig],
    clock: Clock,
    metadata: MetadataCache,
    controller: Controller,
    replicas: ReplicaManager,
    producer_ids: ProducerIds,
    inter_broker: InterBrokerClients,
    group_configs: GroupConfigs,
) -> Coordinators:
    """The group and transaction coordinators, made by the first request (or internal
    topic partition) that needs one: a broker that never sees a group loads none of it."""
    coordinators: Coordinators

    def make() -> CoordinatorParts:
        from ..coordinator.log_writer import LogPartitionWriter
        from ..coordinator.loop_timer import LoopTimer
        from ..groups.coordinator import GroupCoordinator, offsets_topic
        from ..share.share_coordinator import ShareCoordinator, share_group_state_topic
        from ..transactions.coordinator import TransactionCoordinator, transaction_state_topic
        from ..transactions.markers import MarkerRoute

        config = current_config()
        # Timers of the coordinators (sessions, rebalances, offsets expiry) run on the
        # broker's clock, so a test that holds it holds them too.
        timer = LoopTimer(clock)
        groups = GroupCoordinator(
            config,
            offsets_topic(metadata, controller, current_config),
            LogPartitionWriter(replicas),
            timer,
            clock,
            metadata,
            group_configs,
        )
        transactions = TransactionCoordinator(
            config,
            transaction_state_topic(metadata, controller, current_config),
            LogPartitionWriter(replicas),
            timer,
            clock,
            groups,
            producer_ids.next_id,
            MarkerRoute(leader_of, config.broker_id, inter_broker, coordinator_epoch_of),
        )
        share = ShareCoordinator(
            current_config,
            share_group_state_topic(metadata, controller, current_config),
            LogPartitionWriter(replicas),
            timer,
            clock,
        )
        return groups, transactions, share, timer

    def coordinator_epoch_of(transactional_id: str) -> int:
        """The leader epoch of the transactional id's `__transaction_state` partition."""
        topic_of = coordinators.transactions.runtime.topic
        topic = metadata.get(topic_of.name)
        if topic is None or not topic.partitions:
            return 0
        index = topic_of.partition_of(transactional_id, len(topic.partitions))
        return max(topic.partitions[index].leader_epoch, 0)

    def leader_of(topic: str, partition: int) -> int | None:
        """The partition's leader (-1 while it has none; None: no such partition)."""
        found = metadata.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition].leader

    coordinators = Coordinators(make)
    return coordinators


async def _authorizer(
    config: BrokerConfig, membership: Membership
) -> tuple[Authorizer | None, AclStore | None]:
    """The authorizer `authorizer.class.name` asks for, its ACLs loaded from where Kafka
    keeps them (ZooKeeper in a cluster, else a file of the first log dir)."""
    if not config["authorizer.class.name"]:
        return None, None
    from ..authorizer.authorizer import Authorizer  # only with ACLs on

    super_users = [u.strip() for u in config["super.users"].split(";") if u.strip()]
    authorizer = Authorizer(super_users, config["allow.everyone.if.no.acl.found"])
    store = membership.acl_store(config.log_dirs[0])
    await store.start(authorizer.cache, authorizer.changed)
    acls = len(authorizer.cache.bindings())
    log.info(
        "Authorizer %s: %d ACL%s loaded, super users %s, allow.everyone.if.no.acl.found=%s",
        config["authorizer.class.name"],
        acls,
        "" if acls == 1 else "s",
        ", ".join(super_users) or "none",
        "true" if authorizer.allow_everyone_if_no_acl_found else "false",
    )
    return authorizer, store


async def _group_configs(
    config: BrokerConfig, current_config: Callable[[], BrokerConfig], membership: Membership
) -> tuple[GroupConfigs, GroupConfigStore]:
    """Group configs (the GROUP config resource), fed from the membership's store."""
    from ..groups.group_configs import GroupConfigs

    configs = GroupConfigs(current_config)
    store = membership.group_config_store(config.log_dirs[0], configs)
    await store.start()
    if configs.groups():
        log.info("Group configs: %d group(s) configured", len(configs.groups()))
    return configs, store


async def _client_quotas(
    config: BrokerConfig, membership: Membership
) -> tuple[ClientQuotas, ClientQuotaStore]:
    """The client quota managers, fed from where Kafka keeps quota configs (the
    membership's store)."""
    from ..quotas.manager import ClientQuotas

    quotas = ClientQuotas(config["quota.window.num"], config["quota.window.size.seconds"])
    store = membership.client_quota_store(config.log_dirs[0], quotas)
    await store.start()
    if quotas.enabled:
        log.info("Client quotas: %d entities configured", len(quotas.configs))
    return quotas, store
