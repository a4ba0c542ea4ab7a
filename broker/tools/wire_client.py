"""The requests a tool needs that confluent-kafka does not expose, sent by hand.

librdkafka has DeleteConsumerGroupOffsets, but the Python binding does not offer it,
so `brook groups --delete-offsets` sends FindCoordinator v1 and OffsetDelete v0 itself.
Nor does it offer the transaction admin APIs, so `brook transactions` reaches the
cluster through `KafkaCluster`: Metadata, FindCoordinator (key type 1),
ListTransactions, DescribeTransactions, DescribeProducers and WriteTxnMarkers. All are
encoded with kio (the same message types the broker uses) by broker/client.py, over
TLS and SASL as the tool's --command-config says (common.wire_security).
"""

from __future__ import annotations

import dataclasses
import datetime
import ssl
import time
import types
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i64

from brook.broker.client import BlockingClient, ConnectionClosedError, InvalidResponseError
from brook.broker.security.sasl_client import SaslAuthenticationError

from .common import ToolError, split_bootstrap

if TYPE_CHECKING:
    from brook.broker.security.client_security import ClientSecurity

CLIENT_ID = "brook-groups"
TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
# What kio reads from an entity type besides its fields.
KIO_CLASS_ATTRIBUTES = (
    "__type__",
    "__version__",
    "__flexible__",
    "__api_key__",
    "__header_schema__",
)
# Errors after which asking for the coordinator again can succeed (Kafka retries these).
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)
RETRY_BACKOFF_S = 0.2
# What an operator should read for the errors OffsetDelete answers with.
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
    ErrorCode.transactional_id_not_found: "the transactional id could not be found",
    ErrorCode.not_leader_or_follower: "the broker is not the partition's leader or follower",
    ErrorCode.leader_not_available: "the partition has no leader",
    ErrorCode.invalid_producer_epoch: "the producer's epoch is older than the partition's",
    ErrorCode.transaction_coordinator_fenced: "the coordinator epoch is stale",
    ErrorCode.cluster_authorization_failed: "not authorized to act on the cluster",
    ErrorCode.transactional_id_authorization_failed: "not authorized for the transactional id",
    ErrorCode.kafka_storage_error: "the partition's log dir is offline",
}


def describe_code(code: ErrorCode) -> str:
    """`the group is not empty (NON_EMPTY_GROUP)`: a Kafka error code for one line."""
    name = code.name.upper()
    text = ERROR_TEXTS.get(code)
    return f"{text} ({name})" if text else name


class _Connection:
    """A BlockingClient whose failures read as one line for an operator."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float,
        client_id: str = CLIENT_ID,
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

    def close(self) -> None:
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
            api = type(request).__name__.removesuffix("Request")
            raise ToolError(f"the broker closed the connection (does it serve {api}?)") from None
        except TimeoutError:
            raise ToolError("no answer from the broker in time") from None
        except OSError as exc:
            raise ToolError(f"connection to the broker failed: {exc.strerror or exc}") from None
        except InvalidResponseError as exc:
            raise ToolError(f"cannot read the broker's answer: {exc}") from None


def _connect_any(
    bootstrap: str,
    timeout: float,
    client_id: str = CLIENT_ID,
    security: ClientSecurity | None = None,
) -> _Connection:
    """A connection to the first bootstrap server that accepts one."""
    failure: ToolError | None = None
    for host, port in split_bootstrap(bootstrap):
        try:
            return _Connection(host, port, timeout, client_id, security)
        except ToolError as exc:
            failure = exc
    assert failure is not None
    raise failure


def _find_coordinator(
    bootstrap: str, group: str, timeout: float, security: ClientSecurity | None
) -> tuple[str, int]:
    from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest

    connection = _connect_any(bootstrap, timeout, security=security)
    try:
        response = connection.request(FindCoordinatorRequest(key=group))
    finally:
        connection.close()
    if response.error_code != ErrorCode.none:
        raise _CoordinatorError(response.error_code)
    return response.host, response.port


class _CoordinatorError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def delete_offsets(
    bootstrap: str,
    group: str,
    partitions: list[tuple[str, int]],
    timeout: float,
    security: ClientSecurity | None = None,
) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
    """OffsetDelete for `partitions` of `group`: the group-level error and one per partition."""
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )

    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(
        group_id=GroupId(group),
        topics=tuple(
            OffsetDeleteRequestTopic(
                name=TopicName(topic),
                partitions=tuple(
                    OffsetDeleteRequestPartition(partition_index=i32(p)) for p in sorted(indexes)
                ),
            )
            for topic, indexes in sorted(by_topic.items())
        ),
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            host, port = _find_coordinator(bootstrap, group, timeout, security)
            connection = _Connection(host, port, timeout, security=security)
            try:
                response = connection.request(request)
            finally:
                connection.close()
            code = response.error_code
        except _CoordinatorError as exc:
            code = exc.code
        if code not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
            break
        time.sleep(RETRY_BACKOFF_S)  # the coordinator is loading or has moved
    if code != ErrorCode.none:
        return code, {}
    return code, {
        (topic.name, partition.partition_index): partition.error_code
        for topic in response.topics
        for partition in topic.partitions
    }


# --- the transaction admin APIs -----------------------------------------------------------


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


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]


@dataclass
class ClusterMetadata:
    brokers: dict[int, Node]
    topics: dict[str, list[PartitionMetadata]]  # the topics that exist, with partitions
    internal: set[str]
    missing: dict[str, ErrorCode]  # the topics asked for that could not be described


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction under way
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker written yet
    current_txn_start_offset: int  # -1: no open transaction


@dataclass(frozen=True)
class PartitionProducers:
    error: ErrorCode
    producers: tuple[ProducerState, ...]


class CoordinatorError(ToolError):
    """An error code answered for a transactional id (after retries)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(describe_code(code))
        self.code = code


class KafkaCluster:
    """The brokers of one cluster, one connection per broker opened when first needed
    (over TLS and SASL with `security`). Retriable coordinator errors are retried, as
    Kafka's admin client does, until the tool's timeout."""

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
        self._connections: dict[Node, _Connection] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bootstrap_request(self, request: Any) -> Any:
        connection = _connect_any(self.bootstrap, self.timeout, self.client_id, self.security)
        try:
            return connection.request(request)
        finally:
            connection.close()

    def request(self, node: Node, request: Any, response_type: type | None = None) -> Any:
        connection = self._connections.get(node)
        if connection is None:
            connection = _Connection(
                node.host, node.port, self.timeout, self.client_id, self.security
            )
            self._connections[node] = connection
        return connection.request(request, response_type)

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """The brokers, and the partitions of `topics` (of every topic when None)."""
        from kio.schema.metadata.v8 import request as metadata8

        response = self._bootstrap_request(
            metadata8.MetadataRequest(
                topics=None
                if topics is None
                else tuple(metadata8.MetadataRequestTopic(name=TopicName(name)) for name in topics),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )
        found = ClusterMetadata(
            brokers={b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers},
            topics={},
            internal=set(),
            missing={},
        )
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                found.missing[topic.name] = topic.error_code
                continue
            found.topics[topic.name] = sorted(
                (
                    PartitionMetadata(p.partition_index, p.leader_id, tuple(p.replica_nodes))
                    for p in topic.partitions
                ),
                key=lambda p: p.partition,
            )
            if topic.is_internal:
                found.internal.add(topic.name)
        return found

    def _retrying(self, attempt: Any) -> Any:
        """`attempt()` again while it raises a retriable CoordinatorError, until the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt()
            except CoordinatorError as exc:
                if exc.code not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_BACKOFF_S)  # the coordinator is loading or has moved

    def find_transaction_coordinator(self, transactional_id: str) -> Node:
        from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest

        def attempt() -> Node:
            response = self._bootstrap_request(
                FindCoordinatorRequest(key=transactional_id, key_type=i8(TRANSACTION_KEY_TYPE))
            )
            if response.error_code != ErrorCode.none:
                raise CoordinatorError(response.error_code)
            return Node(response.node_id, response.host, response.port)

        node: Node = self._retrying(attempt)
        return node

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions of one id at its coordinator; a CoordinatorError names
        the error the coordinator answered (TRANSACTIONAL_ID_NOT_FOUND, ...)."""
        from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

        def attempt() -> TransactionDescription:
            node = self.find_transaction_coordinator(transactional_id)
            response = self.request(
                node,
                DescribeTransactionsRequest(transactional_ids=(TransactionalId(transactional_id),)),
                describe_transactions_response(),
            )
            [state] = response.transaction_states
            if state.error_code != ErrorCode.none:
                raise CoordinatorError(state.error_code)
            return TransactionDescription(
                coordinator_id=node.node_id,
                transactional_id=state.transactional_id,
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                state=state.transaction_state,
                timeout_ms=state.transaction_timeout // datetime.timedelta(milliseconds=1),
                start_time_ms=state.transaction_start_time,
                partitions=tuple(
                    (topic.topic, partition)
                    for topic in state.topics
                    for partition in topic.partitions
                ),
            )

        description: TransactionDescription = self._retrying(attempt)
        return description

    def list_transactions(
        self, node: Node, producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        """ListTransactions at one broker: the ids its coordinator holds (of `producer_ids`
        only, if given)."""
        from kio.schema.list_transactions.v0.request import ListTransactionsRequest

        def attempt() -> list[TransactionListing]:
            response = self.request(
                node,
                ListTransactionsRequest(
                    state_filters=(), producer_id_filters=tuple(ProducerId(p) for p in producer_ids)
                ),
            )
            if response.error_code != ErrorCode.none:
                raise CoordinatorError(response.error_code)
            return [
                TransactionListing(s.transactional_id, s.producer_id, s.transaction_state)
                for s in response.transaction_states
            ]

        listings: list[TransactionListing] = self._retrying(attempt)
        return listings

    def describe_producers(
        self, node: Node, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], PartitionProducers]:
        """DescribeProducers at one broker: each partition's active producers or error."""
        from kio.schema.describe_producers.v0.request import (
            DescribeProducersRequest,
            TopicRequest,
        )

        response = self.request(
            node,
            DescribeProducersRequest(
                topics=tuple(
                    TopicRequest(
                        name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
                    )
                    for topic, indexes in _by_topic(partitions).items()
                )
            ),
        )
        return {
            (topic.name, partition.partition_index): PartitionProducers(
                partition.error_code,
                tuple(
                    ProducerState(
                        producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch,
                        last_sequence=p.last_sequence,
                        last_timestamp=p.last_timestamp,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_txn_start_offset,
                    )
                    for p in partition.active_producers
                ),
            )
            for topic in response.topics
            for partition in topic.partitions
        }

    def write_abort_marker(
        self,
        node: Node,
        partition: tuple[str, int],
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> ErrorCode:
        """WriteTxnMarkers v1 of one ABORT marker to one partition (at its leader)."""
        from kio.schema.write_txn_markers.v1.request import (
            WritableTxnMarker,
            WritableTxnMarkerTopic,
            WriteTxnMarkersRequest,
        )

        topic, index = partition
        response = self.request(
            node,
            WriteTxnMarkersRequest(
                markers=(
                    WritableTxnMarker(
                        producer_id=ProducerId(producer_id),
                        producer_epoch=i16(producer_epoch),
                        transaction_result=False,  # abort
                        topics=(
                            WritableTxnMarkerTopic(
                                name=TopicName(topic), partition_indexes=(i32(index),)
                            ),
                        ),
                        coordinator_epoch=i32(coordinator_epoch),
                    ),
                )
            ),
        )
        for marker in response.markers:
            for answered in marker.topics:
                for result in answered.partitions:
                    if (answered.name, result.partition_index) == partition:
                        code: ErrorCode = result.error_code
                        return code
        raise ToolError(f"the broker did not answer for partition {topic}-{index}")


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return {topic: sorted(indexes) for topic, indexes in sorted(by_topic.items())}


# --- partition reassignments -----------------------------------------------------------

REASSIGN_CLIENT_ID = "reassign-partitions-tool"  # Kafka's tool's client id
ReplicaMove = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _to_controller(
    bootstrap: str, timeout: float, request: Any, security: ClientSecurity | None
) -> Any:
    """`request` answered by any broker (it forwards it to the controller); NOT_CONTROLLER
    (the controller moving) tried again until the timeout, as Kafka's admin client does."""
    deadline = time.monotonic() + timeout
    while True:
        connection = _connect_any(bootstrap, timeout, REASSIGN_CLIENT_ID, security)
        try:
            response = connection.request(request)
        finally:
            connection.close()
        if response.error_code != ErrorCode.not_controller or time.monotonic() >= deadline:
            break
        time.sleep(RETRY_BACKOFF_S)
    if response.error_code != ErrorCode.none:
        raise ToolError(describe_code(response.error_code))
    return response


def alter_partition_reassignments(
    bootstrap: str,
    timeout: float,
    moves: dict[tuple[str, int], list[int] | None],
    security: ClientSecurity | None = None,
) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    """AlterPartitionReassignments v0: each partition's error and message (None: cancel)."""
    from kio.schema.alter_partition_reassignments.v0 import request as alter0

    by_topic: dict[str, list[alter0.ReassignablePartition]] = {}
    for (topic, index), replicas in sorted(moves.items()):
        by_topic.setdefault(topic, []).append(
            alter0.ReassignablePartition(
                partition_index=i32(index),
                replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
            )
        )
    response = _to_controller(
        bootstrap,
        timeout,
        alter0.AlterPartitionReassignmentsRequest(
            topics=tuple(
                alter0.ReassignableTopic(name=TopicName(topic), partitions=tuple(partitions))
                for topic, partitions in by_topic.items()
            ),
        ),
        security,
    )
    return {
        (topic.name, p.partition_index): (p.error_code, p.error_message)
        for topic in response.responses
        for p in topic.partitions
    }


def list_partition_reassignments(
    bootstrap: str,
    timeout: float,
    partitions: Iterable[tuple[str, int]] | None = None,
    security: ClientSecurity | None = None,
) -> dict[tuple[str, int], ReplicaMove]:
    """ListPartitionReassignments v0: (replicas, adding, removing) of each partition being
    moved, of `partitions` (None: every one)."""
    from kio.schema.list_partition_reassignments.v0 import request as list0

    topics = None
    if partitions is not None:
        topics = tuple(
            list0.ListPartitionReassignmentsTopics(
                name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
            )
            for topic, indexes in _by_topic(partitions).items()
        )
    response = _to_controller(
        bootstrap,
        timeout,
        list0.ListPartitionReassignmentsRequest(topics=topics),
        security,
    )
    return {
        (topic.name, p.partition_index): (
            tuple(p.replicas),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
        )
        for topic in response.topics
        for p in topic.partitions
    }
