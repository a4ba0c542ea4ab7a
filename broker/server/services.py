"""What request handlers work with: the broker's parts, each narrow, none of them the
broker itself (Kafka's KafkaApis takes its collaborators the same way). The broker
builds one at start; handlers reach it as `ctx.services`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from brook.storage.clock import Clock
from brook.storage.log_manager import LogManager

from ..config.broker_config import BrokerConfig
from ..config.dynamic import DynamicBrokerConfig
from ..coordinator.coordinators import Coordinators
from ..faults import FaultRegistry
from ..metadata.cache import MetadataCache
from ..metadata.controller import Controller
from ..metadata.membership import Membership, ProducerIds
from ..metadata.publisher import MetadataPublisher
from ..replica.fetch_purgatory import FetchPurgatory
from ..replica.fetch_sessions import FetchSessionCache
from ..replica.log_dir_mover import LogDirMover
from ..replica.replica_manager import ReplicaManager
from .api_version_manager import ApiVersionManager
from .inter_broker import InterBrokerClients
from .listeners import ListenerManager

if TYPE_CHECKING:
    from ..authorizer.authorizer import Authorizer
    from ..authorizer.store import AclStore
    from ..groups.coordinator import GroupCoordinator
    from ..groups.group_config_store import GroupConfigStore
    from ..groups.group_configs import GroupConfigs
    from ..observability.request_metrics import RequestMetrics
    from ..quotas.manager import ClientQuotas
    from ..quotas.store import ClientQuotaStore
    from ..security.scram_credentials import ScramCredentialStore
    from ..share.share_partitions import SharePartitions
    from ..transactions.coordinator import TransactionCoordinator


class BrokerServices(NamedTuple):
    broker_id: int
    clock: Clock
    dynamic_config: DynamicBrokerConfig
    metadata: MetadataCache
    # Every metadata change goes through it (the controller's, ZooKeeper's, registrations).
    metadata_publisher: MetadataPublisher
    replicas: ReplicaManager
    controller: Controller
    # The group and transaction coordinators, made by the first request that needs one.
    coordinators: Coordinators
    producer_ids: ProducerIds
    fetch_sessions: FetchSessionCache
    fetch_purgatory: FetchPurgatory
    log_manager: LogManager
    log_dir_mover: LogDirMover
    cluster_id: str
    # The listeners: what each advertises to the clients that come in on it.
    listeners: ListenerManager
    # The live brokers' registrations and the elected controller.
    membership: Membership
    # Requests to the other brokers (a partition leader's transaction checks).
    inter_broker: InterBrokerClients
    # Faults armed by tests (the admin endpoint, `brook faults`, the pytest plugin).
    faults: FaultRegistry
    # The API versions advertised and served (an emulated Kafka release's, if asked for).
    api_versions: ApiVersionManager
    # SCRAM credentials: ZooKeeper's /config/users, or a file in the first log dir.
    scram_credentials: ScramCredentialStore
    # The key an unknown SCRAM user's made-up salt is derived from (one per broker run).
    scram_decoy_key: bytes
    # ACLs (authorizer.class.name): None when every request is allowed.
    authorizer: Authorizer | None
    acl_store: AclStore | None
    # Client quotas: the managers every request is measured by while any is configured,
    # and where their configs are kept (ZooKeeper's /config/users|clients, or a file).
    quotas: ClientQuotas
    quota_store: ClientQuotaStore
    # Group configs (the GROUP config resource) and where they are kept.
    group_configs: GroupConfigs
    group_config_store: GroupConfigStore
    # Share groups' partitions led here, and their members' share sessions (KIP-932).
    share_partitions: SharePartitions
    # Requests' counts and times for /metrics: None unless admin.listener is set.
    request_metrics: RequestMetrics | None = None

    @property
    def groups(self) -> GroupCoordinator:
        return self.coordinators.groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.coordinators.transactions

    @property
    def config(self) -> BrokerConfig:
        """The broker's config in force: static, overlaid by dynamic changes."""
        return self.dynamic_config.current
