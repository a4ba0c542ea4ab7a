"""The tools' one Kafka client: `KafkaCluster`, Kafka's requests over broker/client.py.

Every `brook` tool that talks to a cluster goes through a KafkaCluster: requests and
responses are kio's message types (the ones the broker serves), sent by broker/client.py's
BlockingClient over TLS and SASL as the tool's --command-config says
(common.client_settings). The requests themselves live in broker/tools/admin/, a module
per concern; this module holds what they share: the connections, where each request
goes, which errors are tried again, and how an error code reads in one line.

A request goes where Kafka's AdminClient sends it: to any broker (the first bootstrap
server that answers), to the controller (Metadata's controller id), to a group's or a
transactional id's coordinator (FindCoordinator), or to a partition's leader. An answer
with a retriable error (NOT_CONTROLLER, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER) is asked again,
after a short pause and with the destination looked up again, until the tool's --timeout.
"""

from __future__ import annotations

import dataclasses
import datetime
import ssl
import time
import types
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32Timedelta, i64

from brook.broker.client import BlockingClient, ConnectionClosedError, InvalidResponseError
from brook.broker.security.sasl_client import SaslAuthenticationError

from .common import ToolError, split_bootstrap

if TYPE_CHECKING:
    from brook.broker.security.client_security import ClientSecurity

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

GROUP_KEY_TYPE = 0  # FindCoordinator's key types
TRANSACTION_KEY_TYPE = 1
# Errors after which asking again, where the cluster now says, can succeed (Kafka retries).
RETRIABLE = frozenset(
    {
        ErrorCode.not_controller,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
    }
)
RETRY_BACKOFF_S = 0.2
# How much longer than the tool's timeout a connection waits for an answer: the broker
# may take the whole timeout over an operation (a topic created) before it answers.
ANSWER_MARGIN_S = 5.0
# What an operator should read for the errors the tools meet most.
ERROR_TEXTS = {
    ErrorCode.group_id_not_found: "the group does not exist",
    ErrorCode.non_empty_group: "the group is not empty",
    ErrorCode.group_subscribed_to_topic: "the group's members are subscribed to the topic",
    ErrorCode.unknown_topic_or_partition: "unknown topic or partition",
    ErrorCode.invalid_group_id: "the group id is not valid",
    ErrorCode.group_authorization_failed: "not authorized to access the group",
    ErrorCode.topic_authorization_failed: "not authorized to access the topic",
    ErrorCode.coordinator_not_available: "the group coordinator is not available",
    ErrorCode.coordinator_load_in_progress: "the group coordinator is still loading",
    ErrorCode.not_coordinator: "the broker is not the group's coordinator",
    ErrorCode.not_controller: "the broker is not the controller",
    ErrorCode.transactional_id_not_found: "the transactional id could not be found",
    ErrorCode.not_leader_or_follower: "the broker is not the partition's leader or follower",
    ErrorCode.leader_not_available: "the partition has no leader",
    ErrorCode.invalid_producer_epoch: "the producer's epoch is older than the partition's",
    ErrorCode.transaction_coordinator_fenced: "the coordinator epoch is stale",
    ErrorCode.cluster_authorization_failed: "not authorized to act on the cluster",
    ErrorCode.transactional_id_authorization_failed: "not authorized for the transactional id",
    ErrorCode.kafka_storage_error: "the partition's log dir is offline",
    ErrorCode.security_disabled: "the broker has no authorizer (authorizer.class.name)",
}
# What kio reads from an entity type besides its fields.
KIO_CLASS_ATTRIBUTES = (
    "__type__",
    "__version__",
    "__flexible__",
    "__api_key__",
    "__header_schema__",
)


def describe_code(code: ErrorCode) -> str:
    """`the group is not empty (NON_EMPTY_GROUP)`: a Kafka error code for one line."""
    name = code.name.upper()
    text = ERROR_TEXTS.get(code)
    return f"{text} ({name})" if text else name


def describe_error(code: ErrorCode, message: str | None = None) -> str:
    """An error code with the broker's message when it sent one:
    `Topic 'orders' already exists. (TOPIC_ALREADY_EXISTS)`."""
    if message:
        return f"{message} ({code.name.upper()})"
    return describe_code(code)


class ApiError(ToolError):
    """An error code a broker answered (after retries), with its message if any."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(describe_error(code, message))
        self.code = code
        self.error_message = message


def api_error(code: ErrorCode, message: str | None = None) -> ApiError | None:
    """The error an answer's code means, None for success: what a per-item result
    (an ACL created, a credential altered) comes back as."""
    return None if code == ErrorCode.none else ApiError(code, message)


class CoordinatorError(ApiError):
    """An error code answered for a group or transactional id at its coordinator."""


class _Connection:
    """A BlockingClient whose failures read as one line for an operator."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float,
        client_id: str,
        security: ClientSecurity | None = None,
    ) -> None:
        try:
            self.client = BlockingClient(host, port, client_id, timeout, security)
        except SaslAuthenticationError as exc:
            raise ToolError(f"authentication to {host}:{port} failed: {exc}") from None
        except ssl.SSLError as exc:
            raise ToolError(f"TLS handshake with {host}:{port} failed: {exc}") from None
        except ConnectionClosedError:
            raise ToolError(
                f"{host}:{port} closed the connection while logging in (is --command-config's"
                " security.protocol the listener's?)"
            ) from None
        except OSError as exc:
            raise ToolError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.closed = False

    def close(self) -> None:
        self.closed = True
        self.client.close()

    def request(self, request: Any, response_type: type | None = None) -> Any:
        """The answer to `request`, read as `response_type` if given (else kio's type)."""
        try:
            if response_type is None:
                return self.client.request(request)
            self.client.send(request)
            return self.client.receive(response_type)
        except ConnectionClosedError:
            # Kafka closes the connection on a request it does not serve.
            self.close()
            api = type(request).__name__.removesuffix("Request")
            raise UnservedRequestError(
                f"the broker closed the connection (does it serve {api}?)"
            ) from None
        except TimeoutError:
            self.close()
            raise ToolError("no answer from the broker in time") from None
        except OSError as exc:
            self.close()
            raise ToolError(f"connection to the broker failed: {exc.strerror or exc}") from None
        except InvalidResponseError as exc:
            self.close()
            raise ToolError(f"cannot read the broker's answer: {exc}") from None


class UnservedRequestError(ToolError):
    """The broker closed the connection on a request, as Kafka does on one it does not serve."""


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()


@dataclass
class ClusterMetadata:
    brokers: dict[int, Node]
    topics: dict[str, list[PartitionMetadata]]  # the topics that exist, with partitions
    internal: set[str]
    missing: dict[str, ErrorCode]  # the topics asked for that could not be described
    controller_id: int = -1
    topic_ids: dict[str, str] = field(default_factory=dict)  # as Kafka prints them


class KafkaCluster:
    """The brokers of one cluster, one connection per broker address opened when first
    needed (over TLS and SASL with `security`) and kept until `close`."""

    def __init__(
        self,
        bootstrap: str,
        timeout: float,
        client_id: str,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.client_id = client_id
        self.security = security
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._bootstrapped: tuple[str, int] | None = None

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- where requests go --------------------------------------------------------------

    def _connection(self, host: str, port: int) -> _Connection:
        connection = self._connections.get((host, port))
        if connection is None or connection.closed:
            connection = _Connection(
                host, port, self.timeout + ANSWER_MARGIN_S, self.client_id, self.security
            )
            self._connections[(host, port)] = connection
        return connection

    def _any_broker(self) -> _Connection:
        """The first bootstrap server that accepts a connection (Kafka's least loaded node,
        for a client that keeps one connection)."""
        if self._bootstrapped is not None:
            connection = self._connections.get(self._bootstrapped)
            if connection is not None and not connection.closed:
                return connection
        failure: ToolError | None = None
        for address in split_bootstrap(self.bootstrap):
            try:
                connection = self._connection(*address)
            except ToolError as exc:
                failure = exc
                continue
            self._bootstrapped = address
            return connection
        assert failure is not None
        raise failure

    def request(self, node: Node | None, request: Any, response_type: type | None = None) -> Any:
        """`request` answered by `node` (None: any broker)."""
        connection = self._any_broker() if node is None else self._connection(node.host, node.port)
        return connection.request(request, response_type)

    def request_any(self, request: Any, response_type: type | None = None) -> Any:
        return self.request(None, request, response_type)

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """The brokers and the controller, and the partitions of `topics` (of every topic
        when None); never creates a topic."""
        from kio.schema.metadata.v11 import request as metadata11

        response = self.request_any(
            metadata11.MetadataRequest(
                topics=None
                if topics is None
                else tuple(
                    metadata11.MetadataRequestTopic(topic_id=None, name=TopicName(name))
                    for name in topics
                ),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        found = ClusterMetadata(
            brokers={b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers},
            topics={},
            internal=set(),
            missing={},
            controller_id=response.controller_id,
        )
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                found.missing[topic.name] = topic.error_code
                continue
            found.topics[topic.name] = sorted(
                (
                    PartitionMetadata(
                        p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)
                    )
                    for p in topic.partitions
                ),
                key=lambda p: p.partition,
            )
            found.topic_ids[topic.name] = kafka_uuid(topic.topic_id)
            if topic.is_internal:
                found.internal.add(topic.name)
        return found

    def node(self, broker_id: int, metadata: ClusterMetadata | None = None) -> Node:
        """A broker by id, or a ToolError when the cluster has no such broker."""
        brokers = (metadata or self.metadata(topics=())).brokers
        node = brokers.get(broker_id)
        if node is None:
            known = ", ".join(str(b) for b in sorted(brokers)) or "none"
            raise ToolError(f"broker {broker_id} is not in the cluster (brokers: {known})")
        return node

    def controller(self) -> Node:
        """The controller, as Metadata names it; NOT_CONTROLLER while there is none."""
        metadata = self.metadata(topics=())
        node = metadata.brokers.get(metadata.controller_id)
        if node is None:
            raise ApiError(ErrorCode.not_controller)
        return node

    def find_coordinator(self, key: str, key_type: int = GROUP_KEY_TYPE) -> Node:
        """The coordinator of a group (or, key type 1, of a transactional id)."""
        from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest

        def attempt() -> Node:
            response = self.request_any(FindCoordinatorRequest(key=key, key_type=i8(key_type)))
            if response.error_code != ErrorCode.none:
                raise CoordinatorError(response.error_code)
            return Node(response.node_id, response.host, response.port)

        return self.retrying(attempt)

    def at_coordinator(
        self,
        key: str,
        request: Any,
        error_of: Callable[[Any], ErrorCode] = lambda response: response.error_code,
        key_type: int = GROUP_KEY_TYPE,
        response_type: type | None = None,
    ) -> tuple[Node, Any]:
        """`request` answered by the key's coordinator, found again and asked again while
        it answers a retriable error (`error_of` reads the error of an answer); the
        coordinator and its last answer."""

        def attempt() -> tuple[Node, Any]:
            node = self.find_coordinator(key, key_type)
            response = self.request(node, request, response_type)
            code = error_of(response)
            if code in RETRIABLE:
                raise CoordinatorError(code)
            return node, response

        return self.retrying(attempt)

    # --- retries -------------------------------------------------------------------------

    def retrying(self, attempt: Callable[[], T]) -> T:
        """`attempt()` again while it raises an ApiError with a retriable code, until the
        timeout (then that error)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt()
            except ApiError as exc:
                if exc.code not in RETRIABLE or time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_BACKOFF_S)  # the controller, coordinator or leader has moved

    def settle(
        self,
        keys: Iterable[K],
        attempt: Callable[[list[K]], dict[K, R]],
        error_of: Callable[[R], ErrorCode],
    ) -> dict[K, R]:
        """Each key's answer from `attempt(keys)`; the keys answered with a retriable error
        (or all of them, when the attempt raises one) are asked again until the timeout,
        as Kafka's AdminClient retries a topic or partition rather than the request."""
        deadline = time.monotonic() + self.timeout
        pending = list(dict.fromkeys(keys))
        settled: dict[K, R] = {}
        while pending:
            try:
                answered = attempt(pending)
            except ApiError as exc:
                if exc.code not in RETRIABLE or time.monotonic() >= deadline:
                    raise
                time.sleep(RETRY_BACKOFF_S)
                continue
            retry = [
                key for key in pending if key in answered and error_of(answered[key]) in RETRIABLE
            ]
            if time.monotonic() >= deadline:
                retry = []
            settled.update({key: value for key, value in answered.items() if key not in retry})
            pending = retry
            if pending:
                time.sleep(RETRY_BACKOFF_S)
        return settled


def operation_timeout(cluster: KafkaCluster) -> i32Timedelta:
    """How long the broker may take over an operation it waits on (a topic created, a
    leader elected): the tool's timeout, as Kafka's tools pass theirs."""
    return i32Timedelta.parse(datetime.timedelta(seconds=cluster.timeout))


def kafka_uuid(value: Any) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of the 16 bytes, unpadded."""
    if value is None:
        return ""
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Partitions grouped by topic, both sorted, each once."""
    grouped: dict[str, set[int]] = {}
    for topic, index in partitions:
        grouped.setdefault(topic, set()).add(index)
    return {topic: sorted(indexes) for topic, indexes in sorted(grouped.items())}


# --- reading what kio cannot ---------------------------------------------------------------


@cache
def describe_transactions_response() -> type:
    """DescribeTransactions v0's response as kio declares it, but for the start time: Kafka
    answers -1 for an id without a transaction under way, which kio's datetime reader
    refuses ("cannot parse negative timestamp"), so it is read as the plain int64 it is.
    The types are built from kio's at run time: kio reads a dataclass's field types,
    which this module's postponed annotations would leave as strings."""
    from kio.schema.describe_transactions.v0 import response as kio_response

    state = _variant(
        kio_response.TransactionState,
        {"transaction_start_time": (i64, {"kafka_type": "int64"})},
    )
    states = types.GenericAlias(tuple, (state, ...))  # tuple[state, ...]
    return _variant(kio_response.DescribeTransactionsResponse, {"transaction_states": (states, {})})


def _variant(entity: type, changed: dict[str, tuple[Any, dict[str, str]]]) -> type:
    """A copy of the kio entity type `entity` with some fields' types and kafka_types changed."""
    namespace = {name: getattr(entity, name) for name in KIO_CLASS_ATTRIBUTES}
    specs = []
    for spec in dataclasses.fields(entity):
        field_type, metadata = changed.get(spec.name, (spec.type, spec.metadata))
        specs.append((spec.name, field_type, dataclasses.field(metadata=metadata)))
    return dataclasses.make_dataclass(
        entity.__name__, specs, namespace=namespace, frozen=True, slots=True, kw_only=True
    )
