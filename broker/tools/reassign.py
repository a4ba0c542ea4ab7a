"""`brook reassign`: move partitions between brokers (like kafka-reassign-partitions.sh,
option for option, with its output lines and its JSON files).

    brook reassign --bootstrap-server localhost:9092 --generate \\
        --topics-to-move-json-file topics.json --broker-list 2,3,4
    brook reassign --bootstrap-server localhost:9092 --execute \\
        --reassignment-json-file plan.json
    brook reassign --bootstrap-server localhost:9092 --verify \\
        --reassignment-json-file plan.json

The moves go as AlterPartitionReassignments and ListPartitionReassignments (v0) to the
controller (broker/tools/admin/partition_reassignments.py), over TLS and SASL as
--command-config says; topics and brokers (with their racks, for --generate's rack-aware
proposal) come from Metadata. --generate proposes with Kafka's own assignment
(broker/cluster/assignment.py).

--throttle is accepted and not applied: Brook does not throttle replication
(leader/follower.replication.throttled.rate), and says so. A "log_dirs" entry other than
"any" is refused: moving a replica between a broker's log dirs is AlterReplicaLogDirs,
which this tool does not send.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import ToolError, add_connection_arguments, connect, run_tool

if TYPE_CHECKING:
    from .wire_client import KafkaCluster

CLIENT_ID = "reassign-partitions-tool"  # Kafka's tool's client id
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
ANY_LOG_DIR = "any"
# Which options each action takes besides the connection ones (Kafka's permittedArgs).
PERMITTED = {
    "generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
    "execute": {
        "reassignment_json_file",
        "additional",
        "throttle",
        "replica_alter_log_dirs_throttle",
    },
    "verify": {"reassignment_json_file", "preserve_throttles"},
    "cancel": {"reassignment_json_file", "preserve_throttles"},
    "list": set(),
}
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
OPTION_DEFAULTS: dict[str, Any] = {
    "topics_to_move_json_file": None,
    "broker_list": None,
    "disable_rack_aware": False,
    "reassignment_json_file": None,
    "additional": False,
    "throttle": -1,
    "replica_alter_log_dirs_throttle": -1,
    "preserve_throttles": False,
}
CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to"
    " override this and create a new partition assignment in addition to the existing one."
    " The --additional flag can also be used to change the throttle by resubmitting the"
    " current reassignment."
)

EPILOG = """\
The files are kafka-reassign-partitions.sh's:
  --topics-to-move-json-file: {"version":1,"topics":[{"topic":"orders"}]}
  --reassignment-json-file:   {"version":1,"partitions":[{"topic":"orders","partition":0,
                               "replicas":[2,3,4],"log_dirs":["any","any","any"]}]}

examples:
  brook reassign --bootstrap-server localhost:9092 --generate \\
      --topics-to-move-json-file topics.json --broker-list 2,3,4 > proposal.txt
  brook reassign --bootstrap-server localhost:9092 --execute --reassignment-json-file plan.json
  brook reassign --bootstrap-server localhost:9092 --verify --reassignment-json-file plan.json
  brook reassign --bootstrap-server localhost:9092 --list
"""

TopicPartition = tuple[str, int]


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reassign",
        # Kafka's name for the tool, kafka-reassign-partitions.sh.
        aliases=["reassign-partitions"],
        help="move partitions between brokers (like kafka-reassign-partitions.sh)",
        description="Move partition replicas between brokers: generate a proposal, execute"
        " it, verify, cancel or list reassignments.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    actions = parser.add_mutually_exclusive_group()
    for action, text in (
        ("generate", "propose an assignment of the topics over --broker-list"),
        ("execute", "start the reassignment in --reassignment-json-file"),
        ("verify", "show whether the reassignment in --reassignment-json-file is complete"),
        ("cancel", "cancel the reassignments in --reassignment-json-file under way"),
        ("list", "list the reassignments under way"),
    ):
        actions.add_argument(
            f"--{action}", dest="action", action="store_const", const=action, help=text
        )
    parser.add_argument(
        "--topics-to-move-json-file",
        type=Path,
        metavar="FILE",
        help="the topics to spread over --broker-list (--generate; its format below)",
    )
    parser.add_argument(
        "--broker-list", metavar="IDS", help="comma-separated broker ids (--generate)"
    )
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="ignore racks (--generate)"
    )
    parser.add_argument(
        "--reassignment-json-file",
        type=Path,
        metavar="FILE",
        help="the replicas each partition moves to (--execute, --verify, --cancel; below)",
    )
    parser.add_argument(
        "--additional",
        action="store_true",
        help="execute even while other reassignments are under way",
    )
    parser.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="BYTES_PER_S",
        help="accepted for compatibility and not applied: Brook does not throttle replication",
    )
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=-1,
        metavar="BYTES_PER_S",
        help="accepted for compatibility and not applied",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="accepted for compatibility (there are no throttles to clear)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("reassign", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    action = _check_options(args)
    if action == "generate":
        return _generate(args)
    if action == "execute":
        return _execute(args)
    if action == "verify":
        return _verify(args)
    if action == "cancel":
        return _cancel(args)
    return _list(args)


def _check_options(args: argparse.Namespace) -> str:
    """Kafka's validateAndParseArgs: one action, its required options, no others."""
    if args.action is None:
        raise ToolError(
            "Command must include exactly one action: --generate, --execute, --verify,"
            " --cancel, --list",
            2,
        )
    action: str = args.action
    for name in REQUIRED[action]:
        if getattr(args, name) in (None, False):
            raise ToolError(f'Missing required argument "[{name.replace("_", "-")}]"', 2)
    for name, default in OPTION_DEFAULTS.items():
        if getattr(args, name) != default and name not in PERMITTED[action]:
            raise ToolError(
                f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"', 2
            )
    return action


# --- the JSON files ------------------------------------------------------------------------


def _read_json(path: Path, option: str) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot read {option} {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ToolError("The input string is not a valid JSON") from None


def _version(document: Any) -> None:
    version = document.get("version", 1) if isinstance(document, dict) else None
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")


def parse_topics(path: Path) -> list[str]:
    """--topics-to-move-json-file: {"version":1,"topics":[{"topic":NAME},...]}."""
    document = _read_json(path, "--topics-to-move-json-file")
    _version(document)
    topics = []
    for entry in document.get("topics") or []:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str):
            raise ToolError(f'{json.dumps(entry)} is not {{"topic": NAME}}')
        topics.append(topic)
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ToolError(
            f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}"
        )
    return topics


def parse_reassignment(path: Path) -> list[tuple[TopicPartition, list[int]]]:
    """--reassignment-json-file, checked as Kafka's parseExecuteAssignmentArgs checks it."""
    document = _read_json(path, "--reassignment-json-file")
    _version(document)
    found: list[tuple[TopicPartition, list[int]]] = []
    for entry in document.get("partitions") or []:
        try:
            topic, partition = entry["topic"], entry["partition"]
            replicas = entry["replicas"]
            if not isinstance(topic, str) or not isinstance(partition, int):
                raise TypeError
            if not all(isinstance(r, int) for r in replicas):
                raise TypeError
            log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        except (KeyError, TypeError):
            raise ToolError(
                f'{json.dumps(entry)} is not {{"topic": NAME, "partition": N, "replicas": [IDS]}}'
            ) from None
        if len(log_dirs) != len(replicas):
            raise ToolError(
                f"Size of replicas list {replicas} is different from size of log dirs list"
                f" {log_dirs} for partition {topic}-{partition}"
            )
        if any(log_dir != ANY_LOG_DIR for log_dir in log_dirs):
            raise ToolError(
                f'log_dirs other than "any" ({topic}-{partition}) are not supported: brook'
                " reassign does not move replicas between a broker's log dirs"
            )
        found.append(((topic, partition), list(replicas)))
    return found


def _checked(path: Path) -> dict[TopicPartition, list[int]]:
    parts = parse_reassignment(path)
    if not parts:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise ToolError("Partition replica list cannot be empty")
    names = [tp for tp, _ in parts]
    duplicates = sorted({tp for tp in names if names.count(tp) > 1})
    if duplicates:
        raise ToolError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(_name(tp) for tp in duplicates)
        )
    repeated = [
        f"{_name(tp)} contains multiple entries for "
        + ",".join(str(r) for r in sorted({r for r in replicas if replicas.count(r) > 1}))
        for tp, replicas in parts
        if len(set(replicas)) != len(replicas)
    ]
    if repeated:
        raise ToolError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )
    return dict(parts)


def format_reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: sorted by topic and partition, no spaces."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "replicas": list(replicas),
                    "log_dirs": [ANY_LOG_DIR] * len(replicas),
                }
                for (topic, partition), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _ids(ids: Any) -> str:
    return ",".join(map(str, ids))


# --- the cluster -------------------------------------------------------------------------


def _current_assignment(cluster: KafkaCluster, topics: set[str]) -> dict[TopicPartition, list[int]]:
    """Each partition's replicas, from Metadata; a topic that does not exist is an error."""
    found: dict[TopicPartition, list[int]] = {}
    for topic in sorted(topics):
        try:
            metadata = cluster.metadata([topic])
        except ToolError as exc:
            raise ToolError(f"describing topic {topic} failed: {exc}") from None
        partitions = metadata.topics.get(topic)
        if not partitions:
            raise ToolError(f"Topic {topic} not found.")
        for partition in partitions:
            found[(topic, partition.partition)] = list(partition.replicas)
    return found


def _brokers(cluster: KafkaCluster) -> dict[int, str | None]:
    """The live brokers and their racks."""
    try:
        brokers = cluster.metadata(topics=()).brokers
    except ToolError as exc:
        raise ToolError(f"describing the cluster failed: {exc}") from None
    return {node_id: node.rack for node_id, node in brokers.items()}


# --- the actions ---------------------------------------------------------------------------


def _generate(args: argparse.Namespace) -> int:
    from ..cluster.assignment import (
        AdminOperationError,
        BrokerMetadata,
        RackAwareMode,
        assign_replicas_to_brokers,
        broker_metadatas,
    )

    try:
        broker_list = [int(item) for item in args.broker_list.split(",")]
    except ValueError:
        raise ToolError(
            f"--broker-list {args.broker_list!r} is not a list of broker ids", 2
        ) from None
    duplicates = sorted({b for b in broker_list if broker_list.count(b) > 1})
    if duplicates:
        raise ToolError(f"Broker list contains duplicate entries: {_ids(duplicates)}")
    topics = parse_topics(args.topics_to_move_json_file)
    with connect(args, CLIENT_ID) as cluster:
        current = _current_assignment(cluster, set(topics))
        brokers = _brokers(cluster)
    mode = RackAwareMode.DISABLED if args.disable_rack_aware else RackAwareMode.ENFORCED
    chosen = [BrokerMetadata(b, rack) for b, rack in brokers.items() if b in set(broker_list)]
    proposed: dict[TopicPartition, list[int]] = {}
    try:
        metadatas = broker_metadatas(chosen, mode)
        for topic in sorted({t for t, _ in current}):
            partitions = sorted(p for t, p in current if t == topic)
            replication_factor = len(current[(topic, partitions[0])])
            assigned = assign_replicas_to_brokers(metadatas, len(partitions), replication_factor)
            proposed.update({(topic, p): replicas for p, replicas in assigned.items()})
    except AdminOperationError as exc:
        raise ToolError(exc.message) from None
    except Exception as exc:
        raise ToolError(getattr(exc, "message", None) or str(exc)) from None
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")
    return 0


def _execute(args: argparse.Namespace) -> int:
    proposed = _checked(args.reassignment_json_file)
    with connect(args, CLIENT_ID) as cluster:
        return _execute_with(cluster, args, proposed)


def _execute_with(
    cluster: KafkaCluster, args: argparse.Namespace, proposed: dict[TopicPartition, list[int]]
) -> int:
    from .admin.partition_reassignments import (
        alter_partition_reassignments,
        list_partition_reassignments,
    )

    if not args.additional and list_partition_reassignments(cluster):
        raise ToolError(CANNOT_EXECUTE)
    live = _brokers(cluster)
    unknown = sorted({r for replicas in proposed.values() for r in replicas} - set(live))
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    current = _current_assignment(cluster, {topic for topic, _ in proposed})
    missing = sorted(set(proposed) - set(current))
    if missing:
        raise ToolError("Unable to find partition: " + ", ".join(_name(tp) for tp in missing))
    print(
        "Current partition replica assignment\n\n"
        f"{format_reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print(
            "Warning: --throttle is not applied: Brook does not throttle replication"
            " (leader.replication.throttled.rate and follower.replication.throttled.rate are"
            " not served); the replicas copy at full speed.",
            file=sys.stderr,
        )
    results = alter_partition_reassignments(cluster, {tp: list(r) for tp, r in proposed.items()})
    failed = _failures(results)
    if failed:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(failed))
    plural = "" if len(proposed) == 1 else "s"
    names = ",".join(_name(tp) for tp in sorted(proposed))
    print(f"Successfully started partition reassignment{plural} for {names}")
    return 0


def _failures(results: dict[TopicPartition, tuple[Any, str | None]]) -> list[str]:
    from .wire_client import describe_code

    return [
        f"{_name(tp)}: {message or describe_code(error)}"
        for tp, (error, message) in sorted(results.items())
        if error != 0
    ]


def _verify(args: argparse.Namespace) -> int:
    from .admin.partition_reassignments import list_partition_reassignments

    targets = parse_reassignment(args.reassignment_json_file)
    current: dict[TopicPartition, list[int]] = {}
    with connect(args, CLIENT_ID) as cluster:
        ongoing = list_partition_reassignments(cluster)
        not_moving = {topic for (topic, p), _ in targets if (topic, p) not in ongoing}
        for topic in sorted(not_moving):
            # A topic that does not exist has no replicas.
            with contextlib.suppress(ToolError):
                current.update(_current_assignment(cluster, {topic}))
    print("Status of partition reassignment:")
    for tp, target in sorted(targets):
        if tp in ongoing:
            print(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current.get(tp, []) == target:
            print(f"Reassignment of partition {_name(tp)} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {_name(tp)}, but replica set is"
                f" {_ids(current.get(tp, []))} rather than {_ids(target)}."
            )
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from .admin.partition_reassignments import (
        alter_partition_reassignments,
        list_partition_reassignments,
    )

    targets = [tp for tp, _ in parse_reassignment(args.reassignment_json_file)]
    with connect(args, CLIENT_ID) as cluster:
        ongoing = list_partition_reassignments(cluster, targets)
        # Kafka's tool cancels those with no replicas being added or some being removed.
        active = sorted(
            tp for tp, (_, adding, removing) in ongoing.items() if not adding or removing
        )
        if not active:
            print("None of the specified partition reassignments are active.")
            return 0
        results = alter_partition_reassignments(cluster, dict.fromkeys(active))
    failed = _failures(results)
    if failed:
        plural = "" if len(failed) == 1 else "s"
        raise ToolError(
            f"Error cancelling partition reassignment{plural} for:\n" + "\n".join(failed)
        )
    plural = "" if len(active) == 1 else "s"
    print(
        f"Successfully cancelled partition reassignment{plural} for:"
        f" {','.join(_name(tp) for tp in active)}"
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    from .admin.partition_reassignments import list_partition_reassignments

    with connect(args, CLIENT_ID) as cluster:
        ongoing = list_partition_reassignments(cluster)
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        line = f"{_name(tp)}: replicas: {_ids(replicas)}."
        if adding:
            line += f" adding: {_ids(adding)}."
        if removing:
            line += f" removing: {_ids(removing)}."
        print(line)
    return 0
