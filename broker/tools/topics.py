"""`brook topics`: list, describe, create, delete and add partitions to topics.

Shaped like kafka-topics.sh, option for option where Brook has the feature, and with
the same (tab-separated) output lines, so that an operator's habits and scripts carry
over:

    Topic: orders  TopicId: kqWc9dVQSHmTc1iFQn6A2g  PartitionCount: 2  ReplicationFactor: 1  ...
        Topic: orders  Partition: 0  Leader: 0  Replicas: 0  Isr: 0

Everything goes through confluent-kafka's AdminClient (Metadata, CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs), so any Kafka-compatible broker works.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import (
    INTERNAL_TOPICS,
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    describe_error,
    error_name,
    parse_key_values,
    run_admin_action,
    run_tool,
    wait,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from confluent_kafka.admin import AdminClient

ACTION_HELP = {
    "list": "list topic names, one a line",
    "describe": "partitions with leader, replicas and ISR, and each topic's non-default configs",
    "create": "create --topic with --partitions, --replication-factor and --config",
    "delete": "delete the topics matching --topic",
    "alter": "raise the partition count of --topic to --partitions",
}
ACTIONS = tuple(ACTION_HELP)
LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249

EPILOG = """\
The action is a flag, as kafka-topics.sh takes it, or a word: `brook topics list ...`.
--topic takes a regular expression for every action but --create.

examples:
  brook topics --bootstrap-server localhost:9092 --create --topic orders --partitions 3 \\
      --config retention.ms=86400000 --config cleanup.policy=compact
  brook topics --bootstrap-server localhost:9092 --describe --topic 'orders.*'
  brook topics --bootstrap-server localhost:9092 --describe --under-replicated-partitions
  brook topics --bootstrap-server localhost:9092 --alter --topic orders --partitions 6
  brook topics --bootstrap-server localhost:9092 delete --topic orders

topic configs are changed with `brook configs`.
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "topics",
        help="list, describe, create, delete or alter topics (like kafka-topics.sh)",
        description="List, describe, create, delete or add partitions to topics on any"
        " Kafka-compatible broker.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_action_arguments(parser, ACTION_HELP)
    add_connection_arguments(parser)
    parser.add_argument("--topic", metavar="NAME", help="the topic (a regex except for --create)")
    parser.add_argument("--partitions", type=int, metavar="N", help="partition count")
    parser.add_argument(
        "--replication-factor", type=int, metavar="N", help="replicas per partition (--create)"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config for --create (repeatable)",
    )
    parser.add_argument(
        "--if-exists", action="store_true", help="no error if the topic does not exist"
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="no error if the topic already exists"
    )
    parser.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics (__*)"
    )
    parser.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="--describe only partitions whose ISR is smaller than their replica set",
    )
    parser.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="--describe only partitions whose leader is missing or not a live broker",
    )
    parser.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="--describe only topics that have non-default configs, without partitions",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("topics", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    return run_admin_action(
        args,
        _check_options,
        {
            "list": _list,
            "describe": _describe,
            "create": _create,
            "delete": _delete,
            "alter": _alter,
        },
    )


def _check_options(action: str, args: argparse.Namespace) -> None:
    if action in ("create", "delete", "alter") and not args.topic:
        raise ToolError(f"--{action} needs --topic", 2)
    if action == "alter":
        if args.config:
            raise ToolError("--alter changes partition counts; use `brook configs` for configs", 2)
        if args.replication_factor is not None:
            raise ToolError("--alter cannot change the replication factor", 2)
        if args.partitions is None:
            raise ToolError("--alter needs --partitions", 2)
    if action != "create" and args.config:
        raise ToolError("--config is only for --create; use `brook configs` to change configs", 2)
    if action not in ("create", "alter") and args.partitions is not None:
        raise ToolError("--partitions is only for --create and --alter", 2)
    if action != "create" and args.replication_factor is not None:
        raise ToolError("--replication-factor is only for --create", 2)
    if action == "create":
        if args.partitions is not None and args.partitions < 1:
            raise ToolError("--partitions must be at least 1", 2)
        if args.replication_factor is not None and args.replication_factor < 1:
            raise ToolError("--replication-factor must be at least 1", 2)
    describe_only = (
        args.under_replicated_partitions
        or args.unavailable_partitions
        or args.topics_with_overrides
    )
    if describe_only and action != "describe":
        raise ToolError(
            "--under-replicated-partitions, --unavailable-partitions and"
            " --topics-with-overrides are only for --describe",
            2,
        )


# --- reading the cluster ------------------------------------------------------------------


@dataclass
class PartitionInfo:
    id: int
    leader: int  # -1 when there is none
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionInfo]
    configs: dict[str, str] | None  # None: the broker does not serve DescribeConfigs


def _topic_names(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    try:
        metadata = admin.list_topics(timeout=args.timeout)
    except Exception as exc:
        raise ToolError(f"cannot list topics: {describe_error(exc)}") from None
    names = sorted(metadata.topics)
    if args.exclude_internal:
        names = [name for name in names if name not in INTERNAL_TOPICS]
    return names


def _filter(names: list[str], topic: str) -> list[str]:
    try:
        pattern = re.compile(topic)
    except re.error as exc:
        raise ToolError(f"--topic {topic!r} is not a valid regular expression: {exc}", 2) from None
    return [name for name in names if pattern.fullmatch(name)]


def _matching(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    """The topics --topic names (a regex, as kafka-topics.sh takes it), sorted."""
    names = _topic_names(admin, args)
    if args.topic is None:
        return names
    matched = _filter(names, args.topic)
    if not matched and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return matched


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    names = _topic_names(admin, args)
    if args.topic is not None:
        names = _filter(names, args.topic)
    for name in names:
        print(name)
    return 0


def _kafka_uuid(topic_id: Any) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of the 16 bytes, unpadded."""
    if topic_id is None:
        return ""
    high = topic_id.get_most_significant_bits() & (2**64 - 1)
    low = topic_id.get_least_significant_bits() & (2**64 - 1)
    raw = high.to_bytes(8, "big") + low.to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _describe_topics(admin: AdminClient, names: list[str], timeout: float) -> list[TopicInfo]:
    from confluent_kafka import TopicCollection

    if not names:
        return []
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
    topics: list[TopicInfo] = []
    for name in names:
        try:
            description = wait(futures[name], timeout, f"describing topic {name}")
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) == "UNKNOWN_TOPIC_OR_PART":
                continue  # deleted between listing and describing
            raise ToolError(f"cannot describe topic {name}: {describe_error(exc)}") from None
        partitions = [
            PartitionInfo(
                id=partition.id,
                leader=partition.leader.id if partition.leader is not None else -1,
                replicas=[node.id for node in partition.replicas],
                isr=[node.id for node in partition.isr],
            )
            for partition in sorted(description.partitions, key=lambda p: p.id)
        ]
        topics.append(
            TopicInfo(
                name=name,
                topic_id=_kafka_uuid(description.topic_id),
                internal=description.is_internal,
                partitions=partitions,
                configs=None,
            )
        )
    _add_configs(admin, topics, timeout)
    return topics


def _add_configs(admin: AdminClient, topics: list[TopicInfo], timeout: float) -> None:
    """Each topic's non-default configs, as kafka-topics.sh shows them."""
    from .kafka_admin import ConfigResource, ResourceType

    if not topics:
        return
    resources = [ConfigResource(ResourceType.TOPIC, topic.name) for topic in topics]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout)
    except Exception as exc:
        raise ToolError(f"cannot describe configs: {describe_error(exc)}") from None
    by_name = {resource.name: future for resource, future in futures.items()}
    unsupported = False
    for topic in topics:
        try:
            entries = wait(by_name[topic.name], timeout, f"describing configs of {topic.name}")
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) == "_UNSUPPORTED_FEATURE":
                unsupported = True
                continue
            if error_name(exc) == "UNKNOWN_TOPIC_OR_PART":
                continue
            raise ToolError(
                f"cannot describe configs of {topic.name}: {describe_error(exc)}"
            ) from None
        topic.configs = {
            name: entry.value if not entry.is_sensitive else "(sensitive)"
            for name, entry in sorted(entries.items())
            if not entry.is_default
        }
    if unsupported:
        print(
            "note: the broker does not serve DescribeConfigs; topic configs are not shown",
            file=sys.stderr,
        )


def _partition_line(topic: str, partition: PartitionInfo) -> str:
    leader = str(partition.leader) if partition.leader >= 0 else "none"
    replicas = ",".join(map(str, partition.replicas))
    isr = ",".join(map(str, partition.isr))
    return (
        f"\tTopic: {topic}\tPartition: {partition.id}\tLeader: {leader}"
        f"\tReplicas: {replicas}\tIsr: {isr}"
    )


def _topic_line(topic: TopicInfo) -> str:
    replication = len(topic.partitions[0].replicas) if topic.partitions else 0
    configs = ",".join(f"{name}={value}" for name, value in (topic.configs or {}).items())
    return (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id}"
        f"\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication}"
        f"\tConfigs: {configs}"
    )


def _live_brokers(admin: AdminClient, timeout: float) -> set[int]:
    try:
        return set(admin.list_topics(timeout=timeout).brokers)
    except Exception as exc:
        raise ToolError(f"cannot read the cluster's brokers: {describe_error(exc)}") from None


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    topics = _describe_topics(admin, _matching(admin, args), args.timeout)
    if args.topics_with_overrides:
        for topic in topics:
            if topic.configs:
                print(_topic_line(topic))
        return 0
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    live = _live_brokers(admin, args.timeout) if args.unavailable_partitions else set()
    for topic in topics:
        if not filtered:
            print(_topic_line(topic))
        for partition in _selected(topic.partitions, args, live):
            print(_partition_line(topic.name, partition))
    return 0


def _selected(
    partitions: Iterable[PartitionInfo], args: argparse.Namespace, live: set[int]
) -> Iterable[PartitionInfo]:
    for partition in partitions:
        under_replicated = len(partition.isr) < len(partition.replicas)
        unavailable = partition.leader < 0 or partition.leader not in live
        if args.under_replicated_partitions and not under_replicated:
            continue
        if args.unavailable_partitions and not unavailable:
            continue
        yield partition


# --- changing the cluster -----------------------------------------------------------------


def _check_topic_name(name: str) -> None:
    """Kafka's rules for a topic name, checked before asking the broker."""
    if name in (".", ".."):
        raise ToolError(f"topic name {name!r} is illegal: '.' and '..' are not allowed", 2)
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ToolError(
            f"topic name is illegal: it is {len(name)} characters long,"
            f" the limit is {MAX_TOPIC_NAME_LENGTH}",
            2,
        )
    if not LEGAL_TOPIC_CHARS.fullmatch(name):
        raise ToolError(
            f"topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-'"
            " are allowed",
            2,
        )


def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    from .kafka_admin import NewTopic

    name = args.topic
    _check_topic_name(name)
    configs = parse_key_values(args.config, "--config")
    if "." in name and "_" in name:
        # Metric names turn '.' into '_', so such topics can collide in metrics (Kafka warns too).
        print(
            f"WARNING: topic {name} has both '.' and '_'; metric names of topics that differ"
            " only there collide. Better to use one or the other.",
            file=sys.stderr,
        )
    new_topic = NewTopic(
        name,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=(args.replication_factor if args.replication_factor is not None else -1),
        config=configs,
    )
    futures = admin.create_topics(
        [new_topic], operation_timeout=args.timeout, request_timeout=args.timeout
    )
    try:
        wait(futures[name], args.timeout + 5, f"creating topic {name}")
    except ToolError:
        raise
    except Exception as exc:
        if error_name(exc) == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
            return 0
        raise ToolError(f"cannot create topic {name}: {describe_error(exc)}") from None
    print(f"Created topic {name}.")
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    names = _matching(admin, args)
    internal = [name for name in names if name in INTERNAL_TOPICS]
    if internal:
        raise ToolError(f"topic {internal[0]} is internal and cannot be deleted")
    if not names:
        return 0
    futures = admin.delete_topics(names, operation_timeout=args.timeout)
    _wait_each(
        futures,
        names,
        args.timeout,
        "deleting topic",
        "cannot delete",
        # --if-exists: a topic deleted meanwhile is as good as deleted.
        ignore="UNKNOWN_TOPIC_OR_PART" if args.if_exists else None,
    )
    return 0


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    from .kafka_admin import NewPartitions

    names = _matching(admin, args)
    if not names:
        return 0
    futures = admin.create_partitions(
        [NewPartitions(name, args.partitions) for name in names],
        operation_timeout=args.timeout,
    )
    _wait_each(futures, names, args.timeout, "adding partitions to", "cannot add partitions to")
    return 0


def _wait_each(
    futures: dict[str, Future[None]],
    names: list[str],
    timeout: float,
    doing: str,
    failed: str,
    ignore: str | None = None,
) -> None:
    """Wait for each named topic's future, then fail once, naming every topic that failed
    and why; a failure whose error name is `ignore` counts as done."""
    failures = []
    for name in names:
        try:
            wait(futures[name], timeout + 5, f"{doing} {name}")
        except ToolError:
            raise
        except Exception as exc:
            if ignore is not None and error_name(exc) == ignore:
                continue
            failures.append(f"{name}: {describe_error(exc)}")
    if failures:
        raise ToolError(f"{failed} {'; '.join(failures)}")
