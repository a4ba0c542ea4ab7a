"""Which brokers are alive and which one is the controller: what Metadata answers with,
and what leader election will hang on. Membership is the seam Kafka calls MetadataSupport:
everything that differs between a single broker and a ZooKeeper cluster (where metadata,
producer ids, SCRAM credentials, quotas and ACLs are kept; who the controller is) is
asked of it, so that the broker is started the same way in both.

One code path for both set-ups: every broker registers itself (RegisterBrokerRecord,
through the MetadataPublisher) and the cache lists the brokers registered. A single
broker (no `zookeeper.connect`) is its own cluster: LocalMembership registers it in its
own cache and names it the controller. With ZooKeeper, ZkMembership
(broker/zookeeper/membership.py) registers it in /brokers/ids, and every broker's
cache follows that path's children.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..config.broker_config import BrokerConfig, Listener
from ..transactions.producer_ids import ProducerIdManager
from .cache import MetadataCache
from .controller import Controller
from .publisher import MetadataPublisher
from .records import BrokerEndpoint, RegisterBrokerRecord
from .store import LocalMetadataStore, MetadataStore

if TYPE_CHECKING:
    from brook.storage.clock import Clock

    from ..authorizer.store import AclStore
    from ..groups.group_config_store import GroupConfigStore
    from ..groups.group_configs import GroupConfigs
    from ..quotas.manager import ClientQuotas
    from ..quotas.store import ClientQuotaStore
    from ..replica.partition import AlterPartition
    from ..security.scram_credentials import ScramCredentialStore
    from ..server.inter_broker import InterBrokerClients


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


# The epoch of the first controller Kafka elects: a single broker's own.
SINGLE_BROKER_CONTROLLER_EPOCH = 1

ControllerListener = Callable[[int, int, bool], None]
# Told True when the broker must stop acting as a leader (its ZooKeeper session is lost,
# or presumed lost), False when it may again.
FencingListener = Callable[[bool], None]


class Membership(Protocol):
    # The cluster id ZooKeeper holds (/cluster/id); None: the log dirs' own.
    cluster_id: str | None

    async def start(self) -> None:
        """Join the cluster before the log dirs are touched (as Kafka: no ZooKeeper, no
        start); on failure nothing is left open and the error is raised."""
        ...

    @property
    def controller_id(self) -> int:
        """The elected controller (-1 while none is known)."""
        ...

    @property
    def controller_epoch(self) -> int: ...

    @property
    def is_controller(self) -> bool: ...

    def add_controller_listener(self, listener: ControllerListener) -> None:
        """`listener(controller_id, epoch, is_controller)` on the loop at each change."""
        ...

    # Where a leader's ISR changes go (None: a single broker, the whole ISR for ever).
    # Read-only here, so that a membership may hold a narrower AlterPartition.
    @property
    def alter_partition(self) -> AlterPartition | None: ...

    async def metadata_store(self, log_dir: Path) -> MetadataStore:
        """Where the topics are kept: the log dirs, or ZooKeeper."""
        ...

    def leadership_lease_held(self) -> bool:
        """Whether this broker may still take writes as a leader (asked by every append
        as leader: in a cluster, ZooKeeper must have answered lately)."""
        ...

    def prepare_metadata(self, cache: MetadataCache) -> None:
        """Before any partition is made (alter_partition is set from here on)."""
        ...

    async def load_metadata(
        self,
        cache: MetadataCache,
        publisher: MetadataPublisher,
        config: Callable[[], BrokerConfig],
    ) -> None:
        """What the store holds beyond store.load (ZooKeeper's topics), into the cache."""
        ...

    def make_controller(
        self,
        broker_id: int,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        publisher: MetadataPublisher,
    ) -> Controller:
        """What the handlers' topic changes go through."""
        ...

    async def producer_id_manager(self, log_dir: Path) -> ProducerIds:
        """Producer ids unique in the cluster."""
        ...

    # Where the cluster's own state is kept, as Kafka keeps it: a file of the first log
    # dir for a single broker, ZooKeeper's znodes in a cluster.

    def scram_credential_store(self, log_dir: Path) -> ScramCredentialStore:
        """SCRAM credentials (/config/users in ZooKeeper)."""
        ...

    def client_quota_store(self, log_dir: Path, quotas: ClientQuotas) -> ClientQuotaStore:
        """Client quota configs, fed into `quotas` (/config/users, /config/clients, /config/ips)."""
        ...

    def acl_store(self, log_dir: Path) -> AclStore:
        """ACLs (/kafka-acl and its change notifications)."""
        ...

    def group_config_store(self, log_dir: Path, configs: GroupConfigs) -> GroupConfigStore:
        """Group configs, fed into `configs` (/config/groups)."""
        ...

    def add_fencing_listener(self, listener: FencingListener) -> None:
        """`listener(fenced)` on the loop when the broker loses (or regains) the right
        to lead: a partition leader cut off from ZooKeeper stops before another broker
        can be elected in its place."""
        ...

    async def register(self, publisher: MetadataPublisher, broker: RegisterBrokerRecord) -> None:
        """Announce this broker, alive at its endpoints, and learn of the others."""
        ...

    def update_registration(self, broker: RegisterBrokerRecord) -> None:
        """Its listeners changed (AlterConfigs): announce the new endpoints."""
        ...

    async def controlled_shutdown(
        self,
        config: BrokerConfig,
        inter_broker: InterBrokerClients,
        stop_fetching: Callable[[], Awaitable[None]],
    ) -> None:
        """Hand this broker's leaders to other replicas before it stops, while its
        listeners still answer (with controlled.shutdown.enable, in a cluster whose
        controller still knows this broker); `stop_fetching` is awaited once the
        controller has taken this broker out of the ISRs."""
        ...

    async def close(self) -> None:
        """Leave the cluster (the registration goes at once)."""
        ...


def membership_for(
    config: BrokerConfig,
    clock: Clock,
    on_fatal: Callable[[int], None],
    features: Mapping[str, tuple[int, int]],
) -> Membership:
    """ZooKeeper's cluster with `zookeeper.connect`, else the broker alone; `on_fatal`
    asks the broker to stop (with an exit code) when it cannot go on as a member."""
    if not config["zookeeper.connect"]:
        return LocalMembership(config.broker_id)
    from ..zookeeper.membership import ZkMembership  # kazoo only with ZooKeeper

    return ZkMembership(config, clock, on_fatal, features)


def broker_registration(
    broker_id: int,
    advertised: Iterable[Listener],
    security_protocols: Mapping[str, str],
    rack: str | None,
) -> RegisterBrokerRecord:
    """This broker as the others see it: each advertised listener with its protocol."""
    return RegisterBrokerRecord(
        broker_id,
        tuple(
            BrokerEndpoint(
                listener.name,
                listener.host,
                listener.port,
                security_protocols.get(listener.name, "PLAINTEXT"),
            )
            for listener in advertised
        ),
        rack,
    )


class LocalMembership:
    """A broker without ZooKeeper: the only member and the controller."""

    def __init__(self, broker_id: int) -> None:
        self._broker_id = broker_id
        self.cluster_id: str | None = None
        self._publisher: MetadataPublisher | None = None
        self.alter_partition: AlterPartition | None = None

    async def start(self) -> None:
        pass  # nothing to join

    async def metadata_store(self, log_dir: Path) -> MetadataStore:
        return LocalMetadataStore(log_dir, self._broker_id)

    def leadership_lease_held(self) -> bool:
        return True  # no other broker can lead what a single broker leads

    def prepare_metadata(self, cache: MetadataCache) -> None:
        pass  # no ISR changes: the single broker is the whole ISR for ever

    async def load_metadata(
        self,
        cache: MetadataCache,
        publisher: MetadataPublisher,
        config: Callable[[], BrokerConfig],
    ) -> None:
        pass  # store.load had it all

    def make_controller(
        self,
        broker_id: int,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        publisher: MetadataPublisher,
    ) -> Controller:
        return Controller(broker_id, config, cache, publisher)

    async def producer_id_manager(self, log_dir: Path) -> ProducerIds:
        return ProducerIdManager(log_dir)

    def scram_credential_store(self, log_dir: Path) -> ScramCredentialStore:
        from ..security.scram_credentials import LocalScramCredentialStore

        return LocalScramCredentialStore(log_dir)

    def client_quota_store(self, log_dir: Path, quotas: ClientQuotas) -> ClientQuotaStore:
        from ..quotas.store import LocalClientQuotaStore

        return LocalClientQuotaStore(log_dir, quotas)

    def acl_store(self, log_dir: Path) -> AclStore:
        from ..authorizer.store import LocalAclStore

        return LocalAclStore(log_dir)

    def group_config_store(self, log_dir: Path, configs: GroupConfigs) -> GroupConfigStore:
        from ..groups.group_config_store import LocalGroupConfigStore

        return LocalGroupConfigStore(log_dir, configs)

    @property
    def controller_id(self) -> int:
        return self._broker_id

    @property
    def controller_epoch(self) -> int:
        return SINGLE_BROKER_CONTROLLER_EPOCH

    @property
    def is_controller(self) -> bool:
        return True

    def add_controller_listener(self, listener: ControllerListener) -> None:
        pass  # the controller never changes

    def add_fencing_listener(self, listener: FencingListener) -> None:
        pass  # a single broker is never fenced

    async def register(self, publisher: MetadataPublisher, broker: RegisterBrokerRecord) -> None:
        self._publisher = publisher
        publisher.apply([broker])

    def update_registration(self, broker: RegisterBrokerRecord) -> None:
        if self._publisher is not None:
            self._publisher.apply([broker])

    async def controlled_shutdown(
        self,
        config: BrokerConfig,
        inter_broker: InterBrokerClients,
        stop_fetching: Callable[[], Awaitable[None]],
    ) -> None:
        pass  # no other broker to hand anything to

    async def close(self) -> None:
        pass
