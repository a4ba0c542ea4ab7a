"""`brook groups`: list, describe, reset the offsets of and delete consumer groups.

Shaped like kafka-consumer-groups.sh, option for option where Brook has the feature,
with the same tables, so that an operator's habits and scripts carry over:

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID
    app    orders  0          40              42              2    app-1-3f2c.. /10.1 app-1

Groups are read and changed through Kafka's admin requests (ListGroups, DescribeGroups
and, for Kafka 4's consumer groups (KIP-848), ConsumerGroupDescribe, OffsetFetch,
OffsetCommit, DeleteGroups and OffsetDelete at the group's coordinator, ListOffsets for
the log's start and end: broker/tools/admin/), so any Kafka-compatible broker works.
The tables are Kafka 4.4's: --members --verbose and --state --verbose show the epochs
of consumer groups (and "-" for classic ones).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from .common import (
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    run_admin_action,
    run_tool,
)
from .wire_client import KafkaCluster, describe_code

if TYPE_CHECKING:
    from .admin.groups import CommittedOffset

CLIENT_ID = "brook-groups"
TopicPartition = tuple[str, int]  # (topic, partition): plain tuples sort and print well

ACTION_HELP = {
    "list": "list the groups, one a line (with --state: their states too)",
    "describe": "a group's committed offsets, log end offsets and lag per partition, with the"
    " member that owns each (or --members, --state)",
    "reset-offsets": "move an inactive group's committed offsets (a dry run unless --execute)",
    "delete": "delete inactive groups and their committed offsets",
    "delete-offsets": "delete an inactive group's committed offsets of --topic",
}
ACTIONS = tuple(ACTION_HELP)

# Kafka's names of the group states, classic then consumer (KIP-848) (--list --state
# takes them in any case).
STATES = (
    "Stable",
    "Empty",
    "Dead",
    "PreparingRebalance",
    "CompletingRebalance",
    "Assigning",
    "Reconciling",
)
# Kafka's names of the group types (--list --type takes them in any case).
TYPES = {"classic": "Classic", "consumer": "Consumer", "share": "Share", "streams": "Streams"}
# kafka-consumer-groups.sh resets only groups without members; Dead is a group that
# does not exist (yet): resetting its offsets creates it, as Kafka does.
RESETTABLE_STATES = ("Empty", "Dead")
REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance")
MISSING = "-"  # Kafka's placeholder for an empty column
DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)

EPILOG = """\
The action is a flag, as kafka-consumer-groups.sh takes it, or a word: `brook groups list ...`.

examples (HOST is e.g. localhost:9092):
  brook groups --bootstrap-server HOST --list --state
  brook groups --bootstrap-server HOST --describe --group orders-app
  brook groups --bootstrap-server HOST --describe --group orders-app --members --verbose
  brook groups --bootstrap-server HOST --reset-offsets --group orders-app --topic orders \\
      --to-datetime 2024-05-01T12:00:00.000
  brook groups --bootstrap-server HOST --reset-offsets --group orders-app \\
      --topic orders:0,1 --shift-by -10 --execute
  brook groups --bootstrap-server HOST --delete --group orders-app

--reset-offsets prints the new offsets and changes nothing unless --execute is given.
It refuses a group that has members (stop its consumers first), and keeps every new
offset between the partition's log start and log end offsets, as Kafka does.
--to-datetime without a zone is UTC; --by-duration counts back from now (P1DT2H30M).
"""


@dataclass
class MemberInfo:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[TopicPartition]
    # A consumer group's (KIP-848); None for a classic group's member.
    member_epoch: int | None = None
    target_epoch: int | None = None
    target: list[TopicPartition] | None = None


@dataclass
class GroupInfo:
    group_id: str
    state: str  # Kafka's name: Stable, Empty, PreparingRebalance, Reconciling, ...
    assignor: str
    coordinator: str  # host:port  (id), as kafka-consumer-groups.sh prints it
    members: list[MemberInfo] = field(default_factory=list)
    # A consumer group's (KIP-848); None for a classic group.
    group_epoch: int | None = None
    target_epoch: int | None = None


# --- the command line -----------------------------------------------------------------


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "groups",
        # Kafka's name for the tool, kafka-consumer-groups.sh.
        aliases=["consumer-groups"],
        help="list, describe, reset offsets of or delete consumer groups"
        " (like kafka-consumer-groups.sh)",
        description="List, describe, reset the committed offsets of and delete consumer"
        " groups on any Kafka-compatible broker.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_action_arguments(parser, ACTION_HELP)
    add_connection_arguments(parser)
    parser.add_argument(
        "--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)"
    )
    parser.add_argument(
        "--all-groups",
        action="store_true",
        help="every group (--describe, --reset-offsets, --delete)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (--reset-offsets, --delete-offsets; repeatable)",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="--reset-offsets every partition the group has committed offsets for",
    )
    views = parser.add_mutually_exclusive_group()
    views.add_argument(
        "--offsets",
        action="store_true",
        help="--describe offsets and lag per partition (the default)",
    )
    views.add_argument(
        "--members",
        action="store_true",
        help="--describe the members: consumer id, host, client id, partition count"
        " (and the partitions, with --verbose)",
    )
    views.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATE[,STATE...]",
        help="with --describe: coordinator, assignor, state and member count; with --list:"
        " each group's state, only the groups in the STATEs if given (Stable, Empty,"
        " PreparingRebalance, CompletingRebalance)",
    )
    parser.add_argument(
        "--type",
        nargs="?",
        const="",
        metavar="TYPE[,TYPE...]",
        help="with --list: each group's type, only the groups of the TYPEs if given"
        " (classic, consumer)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="--describe more: leader epochs with --offsets, partitions with --members",
    )
    specs = parser.add_mutually_exclusive_group()
    specs.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    specs.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    specs.add_argument(
        "--to-current", action="store_true", help="reset to the committed offset (re-commit it)"
    )
    specs.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    specs.add_argument(
        "--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)"
    )
    specs.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first offset whose timestamp is at or after this time"
        " (UTC unless it ends in Z or +HH:MM)",
    )
    specs.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="reset to the first offset at or after now minus this duration",
    )
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument(
        "--dry-run", action="store_true", help="--reset-offsets: only print the plan (default)"
    )
    runs.add_argument("--execute", action="store_true", help="--reset-offsets: apply the plan")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("groups", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    return run_admin_action(
        args,
        _check_options,
        {
            "list": _list,
            "describe": _describe,
            "reset-offsets": _reset_offsets,
            "delete": _delete,
            "delete-offsets": _delete_offsets,
        },
        CLIENT_ID,
    )


def _reset_spec(args: argparse.Namespace) -> str | None:
    for name in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, name):
            return name
    for name in ("to_offset", "shift_by", "to_datetime", "by_duration"):
        if getattr(args, name) is not None:
            return name
    return None


def _check_options(action: str, args: argparse.Namespace) -> None:
    """Refuse option combinations kafka-consumer-groups.sh refuses, before connecting."""
    if action == "list":
        if args.group or args.all_groups:
            raise ToolError("--list takes no --group; use --describe for a group", 2)
    elif action == "delete-offsets":
        if len(args.group) != 1 or args.all_groups:
            raise ToolError("--delete-offsets needs exactly one --group", 2)
    elif not args.group and not args.all_groups:
        raise ToolError(f"--{action} needs --group (or --all-groups)", 2)
    elif args.group and args.all_groups:
        raise ToolError("give --group or --all-groups, not both", 2)

    if action != "describe" and (args.members or args.offsets):
        raise ToolError("--members and --offsets are only for --describe", 2)
    if action not in ("describe", "list") and args.state is not None:
        raise ToolError("--state is only for --describe and --list", 2)
    if action == "describe" and args.state:
        raise ToolError("--describe --state takes no value; filter states with --list", 2)
    if action != "list" and args.type is not None:
        raise ToolError("--type is only for --list", 2)
    if args.verbose and action != "describe":
        raise ToolError("--verbose is only for --describe", 2)

    spec = _reset_spec(args)
    if action == "reset-offsets":
        if spec is None:
            raise ToolError(
                "--reset-offsets needs one of --to-earliest, --to-latest, --to-current,"
                " --to-offset, --shift-by, --to-datetime, --by-duration",
                2,
            )
        if bool(args.topic) == args.all_topics:
            raise ToolError("--reset-offsets needs --topic or --all-topics (one of them)", 2)
    else:
        if spec is not None or args.dry_run or args.execute:
            raise ToolError(
                "--to-*, --shift-by, --by-duration, --dry-run and --execute are only for"
                " --reset-offsets",
                2,
            )
        if args.all_topics:
            raise ToolError("--all-topics is only for --reset-offsets", 2)
        if args.topic and action != "delete-offsets":
            raise ToolError("--topic is only for --reset-offsets and --delete-offsets", 2)
        if action == "delete-offsets" and not args.topic:
            raise ToolError("--delete-offsets needs --topic", 2)
    for topic in args.topic:
        parse_topic(topic)
    if args.to_datetime is not None:
        parse_datetime(args.to_datetime)
    if args.by_duration is not None:
        _parse_duration(args.by_duration)
    if action == "list" and args.state:
        _parse_states(args.state)


def parse_topic(text: str) -> tuple[str, list[int] | None]:
    """`orders` (every partition) or `orders:0,2` (those partitions)."""
    name, sep, partitions = text.partition(":")
    if not name:
        raise ToolError(f"--topic {text!r} names no topic", 2)
    if not sep:
        return name, None
    try:
        indexes = sorted({int(item) for item in partitions.split(",")})
    except ValueError:
        raise ToolError(f"--topic {text!r} is not TOPIC:PARTITION[,PARTITION...]", 2) from None
    if any(index < 0 for index in indexes):
        raise ToolError(f"--topic {text!r} names a negative partition", 2)
    return name, indexes


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch; without a zone the time is UTC, as in Kafka's tool."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(
            f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +HH:MM)",
            2,
        ) from None
    if "T" not in text:
        raise ToolError(f"--to-datetime {text!r} has no time: write YYYY-MM-DDTHH:mm:SS.sss", 2)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _parse_duration(text: str) -> int:
    """An ISO-8601 duration (PnDTnHnMnS, as java.time.Duration parses it) in milliseconds."""
    match = DURATION.fullmatch(text.upper())
    if match is None or text.upper() in ("P", "PT"):
        raise ToolError(f"--by-duration {text!r} is not an ISO-8601 duration like P1DT2H30M", 2)
    parts = {name: float(value) for name, value in match.groupdict().items() if value}
    seconds = (
        parts.get("days", 0) * 86400
        + parts.get("hours", 0) * 3600
        + parts.get("minutes", 0) * 60
        + parts.get("seconds", 0)
    )
    return int(seconds * 1000)


def _parse_types(text: str) -> set[str]:
    """The group types asked for, by Kafka's lower-case names."""
    types = set()
    for item in text.split(","):
        kind = item.strip().lower()
        if kind not in TYPES:
            raise ToolError(f"--type {item.strip()!r} is not a group type ({', '.join(TYPES)})", 2)
        types.add(kind)
    return types


def _parse_states(text: str) -> list[str]:
    """Kafka's names of the states asked for, each once."""
    by_name = {name.lower(): name for name in STATES}
    states: list[str] = []
    for item in text.split(","):
        state = by_name.get(item.strip().lower())
        if state is None:
            raise ToolError(
                f"--state {item.strip()!r} is not a group state ({', '.join(STATES)})", 2
            )
        states.append(state)
    return list(dict.fromkeys(states))


# --- reading groups ---------------------------------------------------------------------


def listed_groups(
    cluster: KafkaCluster, states: list[str] | None = None, with_types: bool = False
) -> list[Any]:
    """The groups of the cluster (GroupListing), sorted by id."""
    from .admin.groups import list_groups

    listings, failures = list_groups(cluster, states or (), with_types)
    if failures and not listings:
        raise ToolError(f"cannot list groups: {failures[0]}")
    for failure in failures:
        # Some brokers answered, some did not: show what is known, say what is missing.
        print(f"WARNING: a broker did not list its groups: {failure}", file=sys.stderr)
    return listings


def _group_ids(cluster: KafkaCluster, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listing.group_id for listing in listed_groups(cluster)]
    return list(dict.fromkeys(args.group))  # in the order given, each once


def _describe_groups(cluster: KafkaCluster, group_ids: list[str]) -> dict[str, GroupInfo | None]:
    """Each group's state and members; None for a group that does not exist (Dead)."""
    from brook.broker.groups.consumer_protocol import assigned_partitions

    from .admin.groups import describe_group

    described: dict[str, GroupInfo | None] = {}
    for group_id in group_ids:
        try:
            description = describe_group(cluster, group_id)
        except ToolError as exc:
            raise ToolError(f"cannot describe group '{group_id}': {exc}") from None
        if description.error == ErrorCode.group_id_not_found or description.state == "Dead":
            # Not a classic group: a consumer group of Kafka 4's protocol, or none.
            described[group_id] = _describe_consumer_group(cluster, group_id)
            continue
        if description.error != ErrorCode.none:
            raise ToolError(
                f"cannot describe group '{group_id}': {describe_code(description.error)}"
            )
        consumer = description.protocol_type == "consumer"
        members = [
            MemberInfo(
                member_id=member.member_id,
                instance_id=member.group_instance_id,
                client_id=member.client_id,
                host=member.host,
                partitions=sorted(
                    (topic, index)
                    for topic, indexes in (
                        assigned_partitions(member.assignment) if consumer else {}
                    ).items()
                    for index in indexes
                ),
            )
            for member in description.members
        ]
        node = description.coordinator
        described[group_id] = GroupInfo(
            group_id=group_id,
            state=description.state,
            assignor=description.protocol,
            coordinator=f"{node.host}:{node.port}  ({node.node_id})",
            members=sorted(members, key=lambda m: (m.client_id, m.member_id)),
        )
    return described


def _describe_consumer_group(cluster: KafkaCluster, group_id: str) -> GroupInfo | None:
    from .admin.groups import consumer_group_describe

    try:
        description = consumer_group_describe(cluster, group_id)
    except ToolError as exc:
        raise ToolError(f"cannot describe group '{group_id}': {exc}") from None
    if description is None:
        return None
    node = description.coordinator
    members = [
        MemberInfo(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            host=m.host,
            partitions=list(m.assignment),
            member_epoch=m.member_epoch,
            target_epoch=description.assignment_epoch,
            target=list(m.target_assignment),
        )
        for m in description.members
    ]
    return GroupInfo(
        group_id=group_id,
        state=description.state,
        assignor=description.assignor,
        coordinator=f"{node.host}:{node.port}  ({node.node_id})",
        members=sorted(members, key=lambda m: (m.client_id, m.member_id)),
        group_epoch=description.group_epoch,
        target_epoch=description.assignment_epoch,
    )


def _committed(cluster: KafkaCluster, group_id: str) -> dict[TopicPartition, CommittedOffset]:
    """The group's committed offsets (offset and leader epoch), only partitions that
    have one."""
    from .admin.groups import offset_fetch

    try:
        return offset_fetch(cluster, group_id)
    except ToolError as exc:
        raise ToolError(
            f"cannot fetch the committed offsets of group '{group_id}': {exc}"
        ) from None


def log_offsets(
    cluster: KafkaCluster, partitions: Iterable[TopicPartition], spec: int
) -> dict[TopicPartition, int | None]:
    """ListOffsets for each partition: the offset, or None where the topic or partition
    is gone (Kafka's tool shows "-" for those)."""
    from .admin.list_offsets import list_offsets

    offsets: dict[TopicPartition, int | None] = {}
    for tp, (code, offset) in sorted(list_offsets(cluster, partitions, spec).items()):
        if code == ErrorCode.unknown_topic_or_partition:
            offsets[tp] = None
        elif code != ErrorCode.none:
            raise ToolError(f"cannot read the offsets of {_tp(tp)}: {describe_code(code)}")
        else:
            offsets[tp] = offset
    return offsets


def _tp(key: TopicPartition) -> str:
    """A partition as Kafka names it in messages: topic-partition."""
    return f"{key[0]}-{key[1]}"


def topic_partitions(cluster: KafkaCluster, topics: list[str]) -> list[TopicPartition]:
    """The partitions --topic names; a topic without a partition list means all of them."""
    parsed = [parse_topic(text) for text in topics]
    names = sorted({name for name, _ in parsed})
    # Metadata for the topics named, which never creates one.
    metadata = cluster.metadata(names)
    counts: dict[str, int] = {}
    for name in names:
        code = metadata.missing.get(name)
        if code == ErrorCode.unknown_topic_or_partition:
            raise ToolError(f"topic '{name}' does not exist")
        if code is not None:
            raise ToolError(f"cannot describe topic {name}: {describe_code(code)}")
        counts[name] = len(metadata.topics.get(name, []))
    selected: set[TopicPartition] = set()
    for name, indexes in parsed:
        for index in indexes if indexes is not None else range(counts[name]):
            if index >= counts[name]:
                raise ToolError(f"topic '{name}' has no partition {index} (it has {counts[name]})")
            selected.add((name, index))
    return sorted(selected)


# --- output -----------------------------------------------------------------------------


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def print_table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    min_widths: Sequence[int] = (),
    blank_line: bool = True,
) -> None:
    """Left-aligned columns, each as wide as its widest cell (and at least its minimum
    in Kafka's tool), one space apart, the last column unpadded. kafka-consumer-groups.sh
    starts each table with an empty line, which also separates the groups."""
    cells = [list(header)] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    widths = [max(w, m) for w, m in zip_longest(widths, min_widths, fillvalue=0)]
    if blank_line:
        print()
    for row in cells:
        padded = [value.ljust(width) for value, width in zip(row[:-1], widths, strict=False)]
        print(" ".join([*padded, row[-1]]).rstrip())


def _announce_state(info: GroupInfo) -> None:
    """What kafka-consumer-groups.sh says on stderr about a group that is not stable."""
    if info.state == "Empty":
        print(f"\nConsumer group '{info.group_id}' has no active members.", file=sys.stderr)
    elif info.state in REBALANCING_STATES:
        print(f"\nWarning: Consumer group '{info.group_id}' is rebalancing.", file=sys.stderr)


def _missing_groups(missing: list[str]) -> ToolError:
    if len(missing) == 1:
        return ToolError(f"consumer group '{missing[0]}' does not exist")
    return ToolError(f"consumer groups {', '.join(repr(g) for g in missing)} do not exist")


# --- list and describe -----------------------------------------------------------------


def _list(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    if args.state is None and args.type is None:
        for listing in listed_groups(cluster):
            print(listing.group_id)
        return 0
    states = _parse_states(args.state) if args.state else None
    types = _parse_types(args.type) if args.type else None
    listings = listed_groups(cluster, states, with_types=args.type is not None)
    if types is not None:
        listings = [listing for listing in listings if listing.group_type in types]
    header = ["GROUP", *(["TYPE"] if args.type is not None else [])]
    header += ["STATE"] if args.state is not None else []
    rows = []
    for listing in listings:
        row = [listing.group_id]
        if args.type is not None:
            row.append(TYPES.get(listing.group_type, listing.group_type))
        if args.state is not None:
            row.append(listing.state)
        rows.append(row)
    print_table(header, rows, min_widths=[25, 20], blank_line=False)
    return 0


def _describe(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    group_ids = _group_ids(cluster, args)
    described = _describe_groups(cluster, group_ids)
    missing = []
    for group_id in group_ids:
        info = described[group_id]
        if info is None:
            missing.append(group_id)
            continue
        if args.state is not None:
            _describe_state(info, args.verbose)
        elif args.members:
            _describe_members(info, args.verbose)
        else:
            _describe_offsets(cluster, info, args)
    if missing:
        raise _missing_groups(missing)
    return 0


def _describe_state(info: GroupInfo, verbose: bool) -> None:
    _announce_state(info)
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row: list[object] = [info.group_id, info.coordinator, info.assignor, info.state]
    if verbose:  # Kafka 4's columns: a classic group has no epochs ("-")
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [info.group_epoch, info.target_epoch]
    print_table(
        [*header, "#MEMBERS"],
        [[*row, len(info.members)]],
        min_widths=[15, 25, 20, 20, *([15, 25] if verbose else [])],
    )


def _describe_members(info: GroupInfo, verbose: bool) -> None:
    _announce_state(info)
    if not info.members:
        return
    static = any(member.instance_id for member in info.members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else [])]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:  # Kafka 4's columns: a classic member has no epochs nor target ("-")
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = []
    for member in info.members:
        row: list[object] = [info.group_id, member.member_id]
        if static:
            row.append(member.instance_id)
        row += [member.host, member.client_id, len(member.partitions)]
        if verbose:
            row += [member.member_epoch, assignment_text(member.partitions), member.target_epoch]
            row.append(assignment_text(member.target) if member.target is not None else None)
        rows.append(row)
    widths = [15, 15, *([17] if static else []), 15, 15, 15, *([15, 20, 15] if verbose else [])]
    print_table(header, rows, min_widths=widths)


def assignment_text(partitions: list[TopicPartition]) -> str | None:
    """`orders:0,1;payments:2`: a member's partitions, by topic, as Kafka 4 prints them."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return None
    return ";".join(
        f"{topic}:{','.join(map(str, sorted(indexes)))}"
        for topic, indexes in sorted(by_topic.items())
    )


def _describe_offsets(cluster: KafkaCluster, info: GroupInfo, args: argparse.Namespace) -> None:
    """One row per partition the group owns or has committed: committed offset, log end
    offset, lag (their difference) and the member the partition is assigned to."""
    from .admin.list_offsets import LATEST

    _announce_state(info)
    committed = _committed(cluster, info.group_id)
    owners = {tp: member for member in info.members for tp in member.partitions}
    partitions = sorted(set(owners) | set(committed))
    if not partitions:
        if info.state not in ("Empty", *REBALANCING_STATES):
            print(f"\nConsumer group '{info.group_id}' has no offsets.", file=sys.stderr)
        return
    log_end = log_offsets(cluster, partitions, LATEST)
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if args.verbose else [])]
    header += ["CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = []
    for tp in partitions:
        commit = committed.get(tp)
        offset = commit.offset if commit is not None else None
        end = log_end.get(tp)
        owner = owners.get(tp)
        row: list[object] = [info.group_id, tp[0], tp[1]]
        if args.verbose:
            epoch = commit.leader_epoch if commit is not None else None
            row.append(epoch if epoch is not None and epoch >= 0 else None)
        row += [offset, end, end - offset if offset is not None and end is not None else None]
        row += [owner.member_id, owner.host, owner.client_id] if owner else [None] * 3
        rows.append(row)
    widths = [15, 15, 10, *([15] if args.verbose else []), 15, 15, 15, 15, 15]
    print_table(header, rows, min_widths=widths)


# --- reset-offsets -------------------------------------------------------------------------


def _reset_offsets(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    group_ids = _group_ids(cluster, args)
    described = _describe_groups(cluster, group_ids)
    failures: list[str] = []
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group_id in group_ids:
        info = described[group_id]
        state = info.state if info is not None else "Dead"
        if state not in RESETTABLE_STATES:
            # The members would overwrite the new offsets with their next commit, and the
            # coordinator refuses an outside commit into a group with members anyway.
            failures.append(
                f"Assignments can only be reset if the group '{group_id}' is inactive,"
                f" but the current state is {state}"
            )
            continue
        try:
            plan = _plan(cluster, args, group_id, exists=info is not None)
        except ToolError as exc:
            failures.append(str(exc))
            continue
        if plan:
            plans[group_id] = plan
        else:
            print(
                f"Consumer group '{group_id}' has no committed offsets to reset.", file=sys.stderr
            )
    if plans and args.execute:
        for group_id, plan in list(plans.items()):
            try:
                _apply(cluster, group_id, plan)
            except ToolError as exc:
                failures.append(str(exc))
                del plans[group_id]
    if plans:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
            [
                [group_id, tp[0], tp[1], offset]
                for group_id, plan in plans.items()
                for tp, offset in sorted(plan.items())
            ],
            min_widths=[30, 30, 10],
        )
        if not args.execute and not args.dry_run:
            print(
                "Dry run: nothing was changed; add --execute to commit these offsets.",
                file=sys.stderr,
            )
    if failures:
        raise ToolError("; ".join(failures))
    return 0


def _plan(
    cluster: KafkaCluster, args: argparse.Namespace, group_id: str, exists: bool
) -> dict[TopicPartition, int]:
    """The new committed offset of each partition to reset, kept within the log."""
    from .admin.list_offsets import EARLIEST, LATEST

    spec = _reset_spec(args)
    needs_committed = args.all_topics or spec in ("shift_by", "to_current")
    committed = _committed(cluster, group_id) if exists and needs_committed else {}
    if args.all_topics:
        if not exists:
            raise ToolError(f"consumer group '{group_id}' does not exist")
        partitions = sorted(committed)
    else:
        partitions = topic_partitions(cluster, args.topic)
    if not partitions:
        return {}
    earliest = _known(log_offsets(cluster, partitions, EARLIEST))
    latest = _known(log_offsets(cluster, partitions, LATEST))

    if spec == "to_earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec == "to_latest":
        return {tp: latest[tp] for tp in partitions}
    if spec == "to_current":
        # A partition without a commit gets the log end, as kafka-consumer-groups.sh does.
        return {tp: committed[tp].offset if tp in committed else latest[tp] for tp in partitions}
    if spec in ("to_datetime", "by_duration"):
        if spec == "to_datetime":
            timestamp = parse_datetime(args.to_datetime)
        else:
            timestamp = int(time.time() * 1000) - _parse_duration(args.by_duration)
        found = log_offsets(cluster, partitions, timestamp)
        # No record at or after the time: the log end, where the next record will be.
        return {
            tp: offset if (offset := found.get(tp)) is not None and offset >= 0 else latest[tp]
            for tp in partitions
        }
    requested: dict[TopicPartition, int] = {}
    for tp in partitions:
        if spec == "to_offset":
            requested[tp] = args.to_offset
        else:
            if tp not in committed:
                raise ToolError(
                    f"cannot shift the offset of {_tp(tp)} in group '{group_id}': it has no"
                    " committed offset"
                )
            requested[tp] = committed[tp].offset + args.shift_by
    return {tp: _clamp(tp, offset, earliest[tp], latest[tp]) for tp, offset in requested.items()}


def _known(offsets: dict[TopicPartition, int | None]) -> dict[TopicPartition, int]:
    """The offsets, or a ToolError for a partition that vanished since it was listed."""
    known: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        if offset is None:
            raise ToolError(f"partition {_tp(tp)} does not exist")
        known[tp] = offset
    return known


def _clamp(tp: TopicPartition, offset: int, earliest: int, latest: int) -> int:
    """Kafka's checkOffsetsRange: a committed offset outside the log would only make the
    consumer fall back to auto.offset.reset, so the tool moves it to the nearest end."""
    if offset < earliest:
        print(
            f"WARN: New offset ({offset}) is lower than earliest offset for topic partition"
            f" {_tp(tp)}. Value will be set to {earliest}",
            file=sys.stderr,
        )
        return earliest
    if offset > latest:
        print(
            f"WARN: New offset ({offset}) is higher than latest offset for topic partition"
            f" {_tp(tp)}. Value will be set to {latest}",
            file=sys.stderr,
        )
        return latest
    return offset


def _apply(cluster: KafkaCluster, group_id: str, plan: dict[TopicPartition, int]) -> None:
    """Commit the new offsets as an outside client (generation -1, no member id), which
    the coordinator accepts only while the group has no members."""
    from .admin.groups import offset_commit

    try:
        results = offset_commit(cluster, group_id, plan)
    except ToolError as exc:
        raise ToolError(f"cannot reset the offsets of group '{group_id}': {exc}") from None
    errors = {tp: code for tp, code in sorted(results.items()) if code != ErrorCode.none}
    if not errors:
        return
    if ErrorCode.unknown_member_id in errors.values():
        raise ToolError(
            f"consumer group '{group_id}' gained members before the new offsets were"
            " committed; stop its consumers and try again"
        )
    details = ", ".join(f"{_tp(tp)}: {describe_code(code)}" for tp, code in errors.items())
    raise ToolError(f"cannot reset the offsets of group '{group_id}': {details}")


# --- delete --------------------------------------------------------------------------------


def _delete(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.groups import delete_groups

    group_ids = _group_ids(cluster, args)
    if not group_ids:
        return 0
    try:
        results = delete_groups(cluster, group_ids)
    except ToolError as exc:
        raise ToolError(f"cannot delete groups: {exc}") from None
    missing: list[str] = []
    failures: dict[str, str] = {}
    for group_id in group_ids:
        code = results.get(group_id, ErrorCode.unknown_server_error)
        if code == ErrorCode.group_id_not_found:
            missing.append(group_id)
        elif code == ErrorCode.non_empty_group:
            failures[group_id] = f"consumer group '{group_id}' has members and cannot be deleted"
        elif code != ErrorCode.none:
            failures[group_id] = f"cannot delete group '{group_id}': {describe_code(code)}"
    deleted = [g for g in group_ids if g not in missing and g not in failures]
    if deleted:
        quoted = ", ".join(f"'{group_id}'" for group_id in deleted)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    messages = ([str(_missing_groups(missing))] if missing else []) + list(failures.values())
    if messages:
        raise ToolError("; ".join(messages))
    return 0


def _delete_offsets(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.groups import offset_delete

    group_id = args.group[0]
    partitions = topic_partitions(cluster, args.topic)
    error, results = offset_delete(cluster, group_id, partitions)
    if error == ErrorCode.group_id_not_found:
        raise _missing_groups([group_id])
    if error == ErrorCode.non_empty_group:
        raise ToolError(
            f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is"
            " not empty"
        )
    if error != ErrorCode.none:
        raise ToolError(f"cannot delete offsets of group '{group_id}': {describe_code(error)}")
    failed: dict[ErrorCode, list[TopicPartition]] = {}
    for tp, code in sorted(results.items()):
        if code != ErrorCode.none:
            failed.setdefault(code, []).append(tp)
    if not failed:
        topics = ", ".join(sorted({topic for topic, _ in partitions}))
        print(f"Request succeeded for deleting offsets of topic {topics} in group {group_id}")
    print_table(
        ["TOPIC", "PARTITION", "STATUS"],
        [
            [
                tp[0],
                tp[1],
                "Successful" if code == ErrorCode.none else f"Error: {describe_code(code)}",
            ]
            for tp, code in sorted(results.items())
        ],
        min_widths=[30, 15],
    )
    if failed:
        raise ToolError(
            "; ".join(
                f"offsets of {', '.join(map(_tp, tps))} in group '{group_id}' not deleted:"
                f" {describe_code(code)}"
                for code, tps in failed.items()
            )
        )
    return 0
