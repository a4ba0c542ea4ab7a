"""`brook transactions`: list and describe transactions and the producers of a partition,
find hanging transactions and abort them.

Shaped like kafka-transactions.sh, command for command, with its option names, its
tables and its messages, so that an operator's runbooks carry over. Like Kafka's tool it
prints each table with every cell padded to its column's width and followed by a tab
(the last one too):

    TransactionalId	Coordinator	ProducerId	TransactionState
    orders-tx-1    	0          	4001      	Ongoing

A transaction hangs when a partition holds an open transaction (DescribeProducers names
its start offset) that its coordinator will never finish: the coordinator does not know
the producer id, or no longer counts the partition in the id's transaction. Such a
transaction holds back the partition's last stable offset, so read_committed consumers
stop there; `abort` writes the ABORT marker that releases it.

The requests (broker/tools/admin/transactions.py, over TLS and SASL as --command-config
says): Metadata for brokers, partitions and leaders, FindCoordinator (key type 1) and
DescribeTransactions to an id's coordinator, ListTransactions to every broker,
DescribeProducers and WriteTxnMarkers to a partition's leader (or the replica named by
--broker-id).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from .admin.transactions import (
    PartitionProducers,
    ProducerState,
    TransactionDescription,
    describe_producers,
    describe_transaction,
    list_transactions,
    write_abort_marker,
)
from .common import (
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    chosen_action,
    connect,
    run_tool,
)
from .wire_client import (
    ClusterMetadata,
    CoordinatorError,
    KafkaCluster,
    Node,
    describe_code,
)

TopicPartition = tuple[str, int]

CLIENT_ID = "brook-transactions"
ACTION_HELP = {
    "list": "list transactions",
    "describe": "describe the state of an active transactional-id (--transactional-id)",
    "describe-producers": "describe the states of active producers for a topic partition"
    " (--topic, --partition)",
    "abort": "abort a hanging transaction (--topic, --partition and --start-offset, or"
    " --producer-id, --producer-epoch and --coordinator-epoch)",
    "find-hanging": "find hanging transactions (on --broker-id, or of --topic [--partition])",
}
# The options each action takes (argparse dests); any other given is a usage error, as
# kafka-transactions.sh's subcommands each take only their own.
ACTION_OPTIONS = {
    "list": frozenset(),
    "describe": frozenset({"transactional_id"}),
    "describe-producers": frozenset({"topic", "partition", "broker_id"}),
    "abort": frozenset(
        {"topic", "partition", "start_offset", "producer_id", "producer_epoch", "coordinator_epoch"}
    ),
    "find-hanging": frozenset({"topic", "partition", "broker_id", "max_transaction_timeout"}),
}
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # Kafka's default for find-hanging
# DescribeProducers asks for at most this many partitions at once (Kafka's MAX_BATCH_SIZE),
# so that a search of a whole broker does not make one giant request.
MAX_BATCH_SIZE = 500
MAX_PRODUCER_EPOCH = 32767  # an int16

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)

EPILOG = """\
The action is a word, as kafka-transactions.sh takes it, or a flag: `--list`.

examples (HOST is e.g. localhost:9092):
  brook transactions --bootstrap-server HOST list
  brook transactions --bootstrap-server HOST describe --transactional-id orders-tx-1
  brook transactions --bootstrap-server HOST describe-producers --topic orders --partition 0
  brook transactions --bootstrap-server HOST find-hanging --broker-id 0
  brook transactions --bootstrap-server HOST find-hanging --topic orders \\
      --max-transaction-timeout 5
  brook transactions --bootstrap-server HOST abort --topic orders --partition 0 \\
      --start-offset 1234

find-hanging reports the open transactions whose last write is older than
--max-transaction-timeout minutes (default 15: set it to the largest
transaction.timeout.ms of your producers) and that their coordinator does not know.
abort writes an ABORT marker for the transaction starting at --start-offset; it prints
nothing when it succeeds. --command-config secures the connections (TLS, SASL PLAIN or
SCRAM) with librdkafka's property names or Kafka's client ones.
"""


# --- the command line -----------------------------------------------------------------


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "transactions",
        help="list, describe, find hanging and abort transactions (like kafka-transactions.sh)",
        description="Analyze the transactional state of the producers in a Kafka-compatible"
        " cluster; detect and recover from hanging transactions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_action_arguments(parser, ACTION_HELP)
    add_connection_arguments(parser)
    parser.add_argument("--transactional-id", metavar="ID", help="the transactional id (describe)")
    parser.add_argument(
        "--topic",
        metavar="TOPIC",
        help="the topic (describe-producers, abort; find-hanging: limit the search to it)",
    )
    parser.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="the partition (describe-producers, abort; find-hanging with --topic)",
    )
    parser.add_argument(
        "--broker-id",
        type=int,
        metavar="ID",
        help="describe-producers: ask this replica, not the leader; find-hanging: search the"
        " partitions this broker holds a replica of",
    )
    parser.add_argument(
        "--max-transaction-timeout",
        type=int,
        metavar="MINUTES",
        help="find-hanging: only transactions whose last write is older than this"
        f" (default {DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN})",
    )
    parser.add_argument(
        "--start-offset",
        type=int,
        metavar="OFFSET",
        help="abort: the start offset of the transaction to abort",
    )
    parser.add_argument(
        "--producer-id",
        type=int,
        metavar="ID",
        help="abort, instead of --start-offset (with --producer-epoch, --coordinator-epoch)",
    )
    parser.add_argument("--producer-epoch", type=int, metavar="EPOCH", help="abort: see above")
    parser.add_argument("--coordinator-epoch", type=int, metavar="EPOCH", help="abort: see above")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("transactions", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    action = chosen_action(args)
    _check_options(action, args)
    actions: dict[str, Callable[[KafkaCluster, argparse.Namespace], int]] = {
        "list": _list,
        "describe": _describe,
        "describe-producers": _describe_producers,
        "abort": _abort,
        "find-hanging": _find_hanging,
    }
    with connect(args, CLIENT_ID) as cluster:
        return actions[action](cluster, args)


def _check_options(action: str, args: argparse.Namespace) -> None:
    """Refuse what kafka-transactions.sh refuses, before anything connects."""
    for option in sorted(set().union(*ACTION_OPTIONS.values()) - ACTION_OPTIONS[action]):
        if getattr(args, option) is not None:
            takers = [name for name, options in ACTION_OPTIONS.items() if option in options]
            raise ToolError(f"--{option.replace('_', '-')} is only for {_or(takers)}", 2)
    for option in ("partition", "broker_id", "max_transaction_timeout", "start_offset"):
        value = getattr(args, option)
        if value is not None and value < 0:
            raise ToolError(f"--{option.replace('_', '-')} must not be negative", 2)
    if action == "describe" and args.transactional_id is None:
        raise ToolError("Missing required argument --transactional-id", 2)
    if action in ("describe-producers", "abort"):
        for option in ("topic", "partition"):
            if getattr(args, option) is None:
                raise ToolError(f"Missing required argument --{option}", 2)
    if action == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise ToolError(
                "The `find-hanging` command requires either --topic or --broker-id to limit"
                " the scope of the search",
                2,
            )
        if args.partition is not None and args.topic is None:
            raise ToolError("The --partition argument requires --topic to be provided", 2)
    if action == "abort":
        _check_abort_options(args)


def _check_abort_options(args: argparse.Namespace) -> None:
    older = ("producer_id", "producer_epoch", "coordinator_epoch")
    if args.start_offset is None and args.producer_id is None:
        raise ToolError(
            "The transaction to abort must be identified either with --start-offset (for"
            " brokers on 3.0 or above) or with --producer-id, --producer-epoch, and"
            " --coordinator-epoch (for older brokers)",
            2,
        )
    if args.start_offset is not None:
        # Kafka's tool would silently ignore the producer's fields; for a command that
        # changes a partition, an ambiguous request is refused instead.
        given = [f"--{name.replace('_', '-')}" for name in older if getattr(args, name) is not None]
        if given:
            raise ToolError(f"give --start-offset or {', '.join(given)}, not both", 2)
        return
    for name in older[1:]:
        if getattr(args, name) is None:
            raise ToolError(f"Missing required argument --{name.replace('_', '-')}", 2)
    if args.producer_id < 0:
        raise ToolError("--producer-id must not be negative", 2)
    if not 0 <= args.producer_epoch <= MAX_PRODUCER_EPOCH:
        raise ToolError(f"--producer-epoch must be between 0 and {MAX_PRODUCER_EPOCH}", 2)


def _or(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


# --- the actions ----------------------------------------------------------------------


def _list(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    """ListTransactions at every broker: each coordinates its own share of the ids."""
    try:
        brokers = cluster.metadata(topics=()).brokers
        rows = []
        for node_id, node in sorted(brokers.items()):
            for listing in sorted(
                list_transactions(cluster, node), key=lambda found: found.transactional_id
            ):
                rows.append((listing.transactional_id, node_id, listing.producer_id, listing.state))
    except ToolError as exc:
        raise _failed("Failed to list transactions", exc) from None
    _print_table(LIST_HEADERS, rows)
    return 0


def _describe(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    transactional_id = args.transactional_id
    try:
        found = describe_transaction(cluster, transactional_id)
    except ToolError as exc:
        raise _failed(
            f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc
        ) from None
    if found.start_time_ms >= 0:
        start: object = found.start_time_ms
        duration: object = _now_ms() - found.start_time_ms
    else:  # no transaction under way
        start = duration = "None"
    _print_table(
        DESCRIBE_HEADERS,
        [
            (
                found.coordinator_id,
                transactional_id,
                found.producer_id,
                found.producer_epoch,
                found.state,
                found.timeout_ms,
                start,
                duration,
                ",".join(_tp(tp) for tp in found.partitions),
            )
        ],
    )
    return 0


def _describe_producers(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    tp = (args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    context = f"Failed to describe producers for partition {_tp(tp)} on {where}"
    try:
        metadata = cluster.metadata([args.topic])
        if args.broker_id is None:
            node = _leader(metadata, tp)
        else:
            node = _broker(metadata, args.broker_id)
        result = describe_producers(cluster, node, [tp]).get(tp)
    except ToolError as exc:
        raise _failed(context, exc) from None
    _check_answered(context, result)
    assert result is not None
    _print_table(
        PRODUCERS_HEADERS,
        [
            (
                producer.producer_id,
                producer.producer_epoch,
                producer.coordinator_epoch,
                producer.last_sequence,
                producer.last_timestamp,
                _start_offset(producer),
            )
            for producer in result.producers
        ],
    )
    return 0


def _abort(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    tp = (args.topic, args.partition)
    try:
        leader = _leader(cluster.metadata([args.topic]), tp)
    except ToolError as exc:
        raise _failed(f"Failed to find the leader of partition {_tp(tp)}", exc) from None
    if args.start_offset is not None:
        producer_id, producer_epoch, coordinator_epoch = _open_transaction_at(
            cluster, leader, tp, args.start_offset
        )
    else:
        producer_id, producer_epoch = args.producer_id, args.producer_epoch
        # A producer id whose transaction hung before any marker was written shows
        # coordinator epoch -1; 0 is no newer than any epoch the partition can hold.
        coordinator_epoch = max(args.coordinator_epoch, 0)
    spec = (
        f"AbortTransactionSpec(topicPartition={_tp(tp)}, producerId={producer_id},"
        f" producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})"
    )
    try:
        error = write_abort_marker(
            cluster, leader, tp, producer_id, producer_epoch, coordinator_epoch
        )
    except ToolError as exc:
        raise _failed(f"Failed to abort transaction {spec}", exc) from None
    if error != ErrorCode.none:
        raise ToolError(f"Failed to abort transaction {spec}: {describe_code(error)}")
    return 0


def _open_transaction_at(
    cluster: KafkaCluster, leader: Node, tp: TopicPartition, start_offset: int
) -> tuple[int, int, int]:
    """(producer id, epoch, coordinator epoch) of the transaction open at `start_offset`."""
    context = f"Failed to validate producer state for partition {_tp(tp)}"
    try:
        result = describe_producers(cluster, leader, [tp]).get(tp)
    except ToolError as exc:
        raise _failed(context, exc) from None
    _check_answered(context, result)
    assert result is not None
    for producer in result.producers:
        if producer.current_txn_start_offset == start_offset:
            # No marker written yet (-1): 0, as for --coordinator-epoch.
            return producer.producer_id, producer.producer_epoch, max(producer.coordinator_epoch, 0)
    raise ToolError(
        f"Could not find any open transactions starting at offset {start_offset} on"
        f" partition {_tp(tp)}"
    )


def _find_hanging(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    minutes = args.max_transaction_timeout
    if minutes is None:
        minutes = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN
    max_timeout_ms = minutes * 60_000
    partitions_by_node = _partitions_to_search(cluster, args)
    open_transactions = _open_transactions(cluster, partitions_by_node, args.broker_id)
    now = _now_ms()
    # Open long enough that the coordinator should have finished or aborted them.
    candidates = [
        (tp, producer)
        for tp, producer in open_transactions
        if now - producer.last_timestamp > max_timeout_ms
    ]
    hanging = _hanging(cluster, candidates) if candidates else []
    _print_table(
        HANGING_HEADERS,
        [
            (
                tp[0],
                tp[1],
                producer.producer_id,
                producer.producer_epoch,
                producer.coordinator_epoch,
                producer.current_txn_start_offset,
                producer.last_timestamp,
                (now - producer.last_timestamp) // 60_000,
            )
            for tp, producer in sorted(hanging, key=lambda found: (found[0], found[1].producer_id))
        ],
    )
    return 0


def _partitions_to_search(
    cluster: KafkaCluster, args: argparse.Namespace
) -> dict[Node, list[TopicPartition]]:
    """The partitions to search, by the broker to ask: --broker-id's replicas (of --topic,
    if given), or --topic's partitions (just --partition, if given) at their leaders.
    Without --topic every topic is searched but the internal ones, as Kafka's tool does."""
    try:
        metadata = cluster.metadata(None if args.topic is None else [args.topic])
    except ToolError as exc:
        raise _failed("Failed to describe the cluster's topics", exc) from None
    if args.topic is not None and args.topic in metadata.missing:
        code = metadata.missing[args.topic]
        raise ToolError(f"Failed to describe 1 topics: {describe_code(code)}")
    node = None
    if args.broker_id is not None:
        try:
            node = _broker(metadata, args.broker_id)
        except ToolError as exc:
            raise _failed(f"Failed to search broker {args.broker_id}", exc) from None
    by_node: dict[Node, list[TopicPartition]] = {}
    for topic, partitions in sorted(metadata.topics.items()):
        if args.topic is None and topic in metadata.internal:
            continue
        for info in partitions:
            if args.partition is not None and info.partition != args.partition:
                continue
            tp = (topic, info.partition)
            if node is None:
                try:
                    leader = _leader(metadata, tp)
                except ToolError as exc:
                    raise _failed(f"Failed to describe producers for {_tp(tp)}", exc) from None
                by_node.setdefault(leader, []).append(tp)
            elif args.partition is not None or node.node_id in info.replicas:
                by_node.setdefault(node, []).append(tp)
    if args.partition is not None and not by_node:
        tp = (args.topic, args.partition)
        raise ToolError(
            f"Failed to describe producers for partition {_tp(tp)}:"
            f" {describe_code(ErrorCode.unknown_topic_or_partition)}"
        )
    return by_node


def _open_transactions(
    cluster: KafkaCluster, partitions_by_node: dict[Node, list[TopicPartition]], broker: int | None
) -> list[tuple[TopicPartition, ProducerState]]:
    """Every producer with an open transaction in the partitions searched."""
    found: list[tuple[TopicPartition, ProducerState]] = []
    for node, partitions in partitions_by_node.items():
        for start in range(0, len(partitions), MAX_BATCH_SIZE):
            batch = partitions[start : start + MAX_BATCH_SIZE]
            where = f" on broker {broker}" if broker is not None else ""
            context = f"Failed to describe producers for {len(batch)} partitions{where}"
            try:
                results = describe_producers(cluster, node, batch)
            except ToolError as exc:
                raise _failed(context, exc) from None
            for tp in batch:
                result = results.get(tp)
                _check_answered(f"{context} ({_tp(tp)})", result)
                assert result is not None
                found.extend(
                    (tp, producer)
                    for producer in result.producers
                    if producer.current_txn_start_offset >= 0
                )
    return found


def _hanging(
    cluster: KafkaCluster, candidates: list[tuple[TopicPartition, ProducerState]]
) -> list[tuple[TopicPartition, ProducerState]]:
    """The candidates their coordinator will not finish: no transactional id holds the
    producer id, the id is gone, or its transaction does not count the partition (the
    partitions of an ongoing transaction, or of one completing whose markers are not
    all written yet)."""
    producer_ids = {producer.producer_id for _, producer in candidates}
    try:
        transactional_ids: dict[int, str] = {}
        for node in _brokers(cluster):
            for listing in list_transactions(cluster, node, producer_ids):
                if listing.producer_id in producer_ids:
                    transactional_ids[listing.producer_id] = listing.transactional_id
    except ToolError as exc:
        raise _failed(
            f"Failed to list transactions for {len(producer_ids)} producers", exc
        ) from None
    descriptions = _describe_all(cluster, set(transactional_ids.values()))
    hanging = []
    for tp, producer in candidates:
        transactional_id = transactional_ids.get(producer.producer_id)
        description = descriptions.get(transactional_id) if transactional_id else None
        if description is None or tp not in description.partitions:
            hanging.append((tp, producer))
    return hanging


def _describe_all(
    cluster: KafkaCluster, transactional_ids: Iterable[str]
) -> dict[str, TransactionDescription | None]:
    """Each id's description; None for an id its coordinator no longer knows."""
    ids = sorted(transactional_ids)
    descriptions: dict[str, TransactionDescription | None] = {}
    try:
        for transactional_id in ids:
            try:
                descriptions[transactional_id] = describe_transaction(cluster, transactional_id)
            except CoordinatorError as exc:
                if exc.code != ErrorCode.transactional_id_not_found:
                    raise
                descriptions[transactional_id] = None
    except ToolError as exc:
        raise _failed(f"Failed to describe {len(ids)} transactions", exc) from None
    return descriptions


# --- helpers --------------------------------------------------------------------------


def _brokers(cluster: KafkaCluster) -> list[Node]:
    return [node for _, node in sorted(cluster.metadata(topics=()).brokers.items())]


def _broker(metadata: ClusterMetadata, broker_id: int) -> Node:
    node = metadata.brokers.get(broker_id)
    if node is None:
        known = ", ".join(str(b) for b in sorted(metadata.brokers)) or "none"
        raise ToolError(f"broker {broker_id} is not in the cluster (brokers: {known})")
    return node


def _leader(metadata: ClusterMetadata, tp: TopicPartition) -> Node:
    """The partition's leader, or ToolError with the error Kafka's client would see."""
    topic, index = tp
    if topic in metadata.missing:
        raise ToolError(describe_code(metadata.missing[topic]))
    partitions = {info.partition: info for info in metadata.topics.get(topic, [])}
    if index not in partitions:
        raise ToolError(describe_code(ErrorCode.unknown_topic_or_partition))
    node = metadata.brokers.get(partitions[index].leader)
    if node is None:
        raise ToolError(describe_code(ErrorCode.leader_not_available))
    return node


def _check_answered(context: str, result: PartitionProducers | None) -> None:
    if result is None:
        raise ToolError(f"{context}: the broker did not answer for the partition")
    if result.error != ErrorCode.none:
        raise ToolError(f"{context}: {describe_code(result.error)}")


def _failed(context: str, exc: ToolError) -> ToolError:
    """Kafka's `CONTEXT: CAUSE` line, keeping the cause's exit code."""
    return ToolError(f"{context}: {exc}", exc.exit_code)


def _start_offset(producer: ProducerState) -> object:
    return producer.current_txn_start_offset if producer.current_txn_start_offset >= 0 else "None"


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"  # Kafka's TopicPartition.toString


def _now_ms() -> int:
    return int(time.time() * 1000)


def _print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Kafka's prettyPrintTable: each cell left-aligned to its column's widest cell and
    followed by a tab, the header first."""
    cells = [list(headers)] + [[str(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("".join(value.ljust(width) + "\t" for value, width in zip(row, widths, strict=True)))
