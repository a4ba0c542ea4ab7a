"""`brook topics`: list, describe, create, delete and add partitions to topics.

Shaped like kafka-topics.sh, option for option where Brook has the feature, and with
the same (tab-separated) output lines, so that an operator's habits and scripts carry
over:

    Topic: orders  TopicId: kqWc9dVQSHmTc1iFQn6A2g  PartitionCount: 2  ReplicationFactor: 1  ...
        Topic: orders  Partition: 0  Leader: 0  Replicas: 0  Isr: 0

Everything goes through Kafka's admin requests (Metadata, CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs: broker/tools/admin/), so any Kafka-compatible broker
works.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from .common import (
    INTERNAL_TOPICS,
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    parse_key_values,
    run_admin_action,
    run_tool,
)
from .wire_client import KafkaCluster, UnservedRequestError, describe_error

CLIENT_ID = "brook-topics"

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
        CLIENT_ID,
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


def _topic_names(cluster: KafkaCluster, args: argparse.Namespace) -> list[str]:
    metadata = cluster.metadata()
    names = sorted({*metadata.topics, *metadata.missing})
    if args.exclude_internal:
        names = [name for name in names if name not in INTERNAL_TOPICS]
    return names


def _filter(names: list[str], topic: str) -> list[str]:
    try:
        pattern = re.compile(topic)
    except re.error as exc:
        raise ToolError(f"--topic {topic!r} is not a valid regular expression: {exc}", 2) from None
    return [name for name in names if pattern.fullmatch(name)]


def _matching(cluster: KafkaCluster, args: argparse.Namespace) -> list[str]:
    """The topics --topic names (a regex, as kafka-topics.sh takes it), sorted."""
    names = _topic_names(cluster, args)
    if args.topic is None:
        return names
    matched = _filter(names, args.topic)
    if not matched and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return matched


def _list(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    names = _topic_names(cluster, args)
    if args.topic is not None:
        names = _filter(names, args.topic)
    for name in names:
        print(name)
    return 0


def _describe_topics(cluster: KafkaCluster, names: list[str]) -> list[TopicInfo]:
    if not names:
        return []
    # Metadata for the topics named, which never creates one.
    metadata = cluster.metadata(names)
    topics: list[TopicInfo] = []
    for name in names:
        code = metadata.missing.get(name)
        if code == ErrorCode.unknown_topic_or_partition:
            continue  # deleted between listing and describing
        if code is not None:
            raise ToolError(f"cannot describe topic {name}: {describe_error(code)}")
        partitions = [
            PartitionInfo(
                id=partition.partition,
                leader=partition.leader,
                replicas=list(partition.replicas),
                isr=list(partition.isr),
            )
            for partition in metadata.topics.get(name, [])
        ]
        topics.append(
            TopicInfo(
                name=name,
                topic_id=metadata.topic_ids.get(name, ""),
                internal=name in metadata.internal,
                partitions=partitions,
                configs=None,
            )
        )
    _add_configs(cluster, topics)
    return topics


def _add_configs(cluster: KafkaCluster, topics: list[TopicInfo]) -> None:
    """Each topic's non-default configs, as kafka-topics.sh shows them."""
    from .admin.configs import TOPIC, describe_configs

    if not topics:
        return
    try:
        described = describe_configs(cluster, [(TOPIC, topic.name) for topic in topics])
    except UnservedRequestError:
        print(
            "note: the broker does not serve DescribeConfigs; topic configs are not shown",
            file=sys.stderr,
        )
        return
    for topic in topics:
        result = described.get((TOPIC, topic.name))
        if result is None or result.error == ErrorCode.unknown_topic_or_partition:
            continue
        if result.error != ErrorCode.none:
            raise ToolError(
                f"cannot describe configs of {topic.name}:"
                f" {describe_error(result.error, result.message)}"
            )
        topic.configs = {
            # A config without a value reads null, as Kafka's tool prints it.
            name: "(sensitive)" if entry.is_sensitive else _or_null(entry.value)
            for name, entry in sorted(result.entries.items())
            if not entry.is_default
        }


def _or_null(value: str | None) -> str:
    return "null" if value is None else value


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


def _describe(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    topics = _describe_topics(cluster, _matching(cluster, args))
    if args.topics_with_overrides:
        for topic in topics:
            if topic.configs:
                print(_topic_line(topic))
        return 0
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    live = set(cluster.metadata(topics=()).brokers) if args.unavailable_partitions else set()
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


def _create(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.topics import NewTopic, create_topics

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
        configs=configs,
    )
    code, message = create_topics(cluster, [new_topic]).get(name, _UNANSWERED)
    if code == ErrorCode.topic_already_exists and args.if_not_exists:
        return 0
    if code != ErrorCode.none:
        raise ToolError(f"cannot create topic {name}: {describe_error(code, message)}")
    print(f"Created topic {name}.")
    return 0


def _delete(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.topics import delete_topics

    names = _matching(cluster, args)
    internal = [name for name in names if name in INTERNAL_TOPICS]
    if internal:
        raise ToolError(f"topic {internal[0]} is internal and cannot be deleted")
    if not names:
        return 0
    _fail_for_each(
        delete_topics(cluster, names),
        names,
        "cannot delete",
        # --if-exists: a topic deleted meanwhile is as good as deleted.
        ignore=ErrorCode.unknown_topic_or_partition if args.if_exists else None,
    )
    return 0


def _alter(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.topics import create_partitions

    names = _matching(cluster, args)
    if not names:
        return 0
    counts = dict.fromkeys(names, args.partitions)
    _fail_for_each(create_partitions(cluster, counts), names, "cannot add partitions to")
    return 0


# What a topic the broker left out of its answer reads as.
_UNANSWERED: tuple[ErrorCode, str | None] = (
    ErrorCode.unknown_server_error,
    "the broker did not answer for the topic",
)


def _fail_for_each(
    outcomes: dict[str, tuple[ErrorCode, str | None]],
    names: list[str],
    failed: str,
    ignore: ErrorCode | None = None,
) -> None:
    """Fail once, naming every topic that failed and why; a failure with the error code
    `ignore` counts as done."""
    failures = []
    for name in names:
        code, message = outcomes.get(name, _UNANSWERED)
        if code in (ErrorCode.none, ignore):
            continue
        failures.append(f"{name}: {describe_error(code, message)}")
    if failures:
        raise ToolError(f"{failed} {'; '.join(failures)}")
