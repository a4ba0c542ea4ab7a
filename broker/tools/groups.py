"""`brook groups`: list, describe, reset the offsets of and delete consumer groups.

Shaped like kafka-consumer-groups.sh, option for option where Brook has the feature,
with the same tables, so that an operator's habits and scripts carry over:

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID
    app    orders  0          40              42              2    app-1-3f2c.. /10.1 app-1

Groups are read and changed through confluent-kafka's AdminClient (ListGroups,
DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups, ListOffsets for the log's
start and end), so any Kafka-compatible broker works. `--delete-offsets` needs
OffsetDelete, which the Python binding does not expose; wire_client sends it.
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

from .common import (
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    describe_error,
    error_name,
    run_admin_action,
    run_tool,
    wait,
    wire_security,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

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

# Kafka's names of the classic group states, by confluent-kafka's ConsumerGroupState names.
STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "UNKNOWN": "Unknown",
}
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


@dataclass
class GroupInfo:
    group_id: str
    state: str  # Kafka's name: Stable, Empty, PreparingRebalance, ...
    assignor: str
    coordinator: str  # host:port  (id), as kafka-consumer-groups.sh prints it
    members: list[MemberInfo] = field(default_factory=list)


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
        _parse_topic(topic)
    if args.to_datetime is not None:
        _parse_datetime(args.to_datetime)
    if args.by_duration is not None:
        _parse_duration(args.by_duration)
    if action == "list" and args.state:
        _parse_states(args.state)


def _parse_topic(text: str) -> tuple[str, list[int] | None]:
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


def _parse_datetime(text: str) -> int:
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


def _parse_states(text: str) -> set[Any]:
    from confluent_kafka import ConsumerGroupState

    by_name = {kafka.lower(): ConsumerGroupState[name] for name, kafka in STATE_NAMES.items()}
    states = set()
    for item in text.split(","):
        state = by_name.get(item.strip().lower())
        if state is None or item.strip().lower() == "unknown":
            valid = ", ".join(name for name in STATE_NAMES.values() if name != "Unknown")
            raise ToolError(f"--state {item.strip()!r} is not a group state ({valid})", 2)
        states.add(state)
    return states


# --- reading groups ---------------------------------------------------------------------


def _state_name(state: Any) -> str:
    return STATE_NAMES.get(getattr(state, "name", ""), str(state))


def _list_groups(admin: AdminClient, timeout: float, states: set[Any] | None = None) -> list[Any]:
    """The groups of the cluster (ConsumerGroupListing), sorted by id."""
    options: dict[str, Any] = {"request_timeout": timeout}
    if states:
        options["states"] = states
    try:
        future = admin.list_consumer_groups(**options)
        result = wait(future, timeout + 5, "listing groups")
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"cannot list groups: {describe_error(exc)}") from None
    if result.errors and not result.valid:
        raise ToolError(f"cannot list groups: {describe_error(result.errors[0])}")
    for error in result.errors:
        # Some brokers answered, some did not: show what is known, say what is missing.
        print(
            f"WARNING: a broker did not list its groups: {describe_error(error)}", file=sys.stderr
        )
    return sorted(result.valid, key=lambda listing: listing.group_id)


def _group_ids(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listing.group_id for listing in _list_groups(admin, args.timeout)]
    return list(dict.fromkeys(args.group))  # in the order given, each once


def _describe_groups(
    admin: AdminClient, group_ids: list[str], timeout: float
) -> dict[str, GroupInfo | None]:
    """Each group's state and members; None for a group that does not exist (Dead)."""
    if not group_ids:
        return {}
    try:
        futures = admin.describe_consumer_groups(group_ids, request_timeout=timeout)
    except Exception as exc:
        raise ToolError(f"cannot describe groups: {describe_error(exc)}") from None
    described: dict[str, GroupInfo | None] = {}
    for group_id in group_ids:
        try:
            description = wait(futures[group_id], timeout + 5, f"describing group {group_id}")
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) == "GROUP_ID_NOT_FOUND":
                described[group_id] = None
                continue
            raise ToolError(f"cannot describe group '{group_id}': {describe_error(exc)}") from None
        state = _state_name(description.state)
        if state == "Dead":
            described[group_id] = None
            continue
        node = description.coordinator
        members = [
            MemberInfo(
                member_id=member.member_id,
                instance_id=member.group_instance_id,
                client_id=member.client_id,
                host=member.host,
                partitions=sorted(
                    (tp.topic, tp.partition)
                    for tp in (member.assignment.topic_partitions if member.assignment else [])
                ),
            )
            for member in description.members
        ]
        described[group_id] = GroupInfo(
            group_id=group_id,
            state=state,
            assignor=description.partition_assignor or "",
            coordinator=f"{node.host}:{node.port}  ({node.id})" if node is not None else MISSING,
            members=sorted(members, key=lambda m: (m.client_id, m.member_id)),
        )
    return described


def _committed(admin: AdminClient, group_id: str, timeout: float) -> dict[TopicPartition, Any]:
    """The group's committed offsets (confluent-kafka TopicPartitions with offset and
    leader epoch), only partitions that have one."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    try:
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=timeout
        )
        result = wait(futures[group_id], timeout + 5, f"fetching the offsets of {group_id}")
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(
            f"cannot fetch the committed offsets of group '{group_id}': {describe_error(exc)}"
        ) from None
    # A partition without a commit comes back as OFFSET_INVALID (-1001).
    return {
        (tp.topic, tp.partition): tp
        for tp in result.topic_partitions
        if tp.error is None and tp.offset >= 0
    }


def _log_offsets(
    admin: AdminClient, partitions: Iterable[TopicPartition], spec: Any, timeout: float
) -> dict[TopicPartition, int | None]:
    """ListOffsets for each partition: the offset, or None where the topic or partition
    is gone (Kafka's tool shows "-" for those)."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    wanted = {KafkaTopicPartition(topic, partition): spec for topic, partition in partitions}
    if not wanted:
        return {}
    try:
        futures = admin.list_offsets(wanted, request_timeout=timeout)
    except Exception as exc:
        raise ToolError(f"cannot read the partitions' offsets: {describe_error(exc)}") from None
    offsets: dict[TopicPartition, int | None] = {}
    for tp, future in futures.items():
        key = (tp.topic, tp.partition)
        try:
            offsets[key] = wait(future, timeout + 5, f"reading the offsets of {_tp(key)}").offset
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"):
                offsets[key] = None
                continue
            raise ToolError(
                f"cannot read the offsets of {_tp(key)}: {describe_error(exc)}"
            ) from None
    return offsets


def _tp(key: TopicPartition) -> str:
    """A partition as Kafka names it in messages: topic-partition."""
    return f"{key[0]}-{key[1]}"


def _topic_partitions(
    admin: AdminClient, topics: list[str], timeout: float
) -> list[TopicPartition]:
    """The partitions --topic names; a topic without a partition list means all of them."""
    from confluent_kafka import TopicCollection

    parsed = [_parse_topic(text) for text in topics]
    names = sorted({name for name, _ in parsed})
    # describe_topics, unlike a metadata request for the topic, never auto-creates it.
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
    counts: dict[str, int] = {}
    for name in names:
        try:
            description = wait(futures[name], timeout + 5, f"describing topic {name}")
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) == "UNKNOWN_TOPIC_OR_PART":
                raise ToolError(f"topic '{name}' does not exist") from None
            raise ToolError(f"cannot describe topic {name}: {describe_error(exc)}") from None
        counts[name] = len(description.partitions)
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


def _print_table(
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


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    if args.state is None:
        for listing in _list_groups(admin, args.timeout):
            print(listing.group_id)
        return 0
    states = _parse_states(args.state) if args.state else None
    listings = _list_groups(admin, args.timeout, states)
    _print_table(
        ["GROUP", "STATE"],
        [[listing.group_id, _state_name(listing.state)] for listing in listings],
        min_widths=[15],
        blank_line=False,
    )
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    group_ids = _group_ids(admin, args)
    described = _describe_groups(admin, group_ids, args.timeout)
    missing = []
    for group_id in group_ids:
        info = described[group_id]
        if info is None:
            missing.append(group_id)
            continue
        if args.state is not None:
            _describe_state(info)
        elif args.members:
            _describe_members(info, args.verbose)
        else:
            _describe_offsets(admin, info, args)
    if missing:
        raise _missing_groups(missing)
    return 0


def _describe_state(info: GroupInfo) -> None:
    _announce_state(info)
    _print_table(
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [[info.group_id, info.coordinator, info.assignor, info.state, len(info.members)]],
        min_widths=[15, 25, 20, 15],
    )


def _describe_members(info: GroupInfo, verbose: bool) -> None:
    _announce_state(info)
    if not info.members:
        return
    static = any(member.instance_id for member in info.members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else [])]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS", *(["ASSIGNMENT"] if verbose else [])]
    rows = []
    for member in info.members:
        row: list[object] = [info.group_id, member.member_id]
        if static:
            row.append(member.instance_id)
        row += [member.host, member.client_id, len(member.partitions)]
        if verbose:
            row.append(_assignment(member.partitions))
        rows.append(row)
    _print_table(header, rows, min_widths=[15, 15, *([17] if static else []), 15, 15, 11])


def _assignment(partitions: list[TopicPartition]) -> str | None:
    """`orders(0,1), payments(2)`: a member's partitions, by topic, as Kafka prints them."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return None
    return ", ".join(
        f"{topic}({','.join(map(str, sorted(indexes)))})"
        for topic, indexes in sorted(by_topic.items())
    )


def _describe_offsets(admin: AdminClient, info: GroupInfo, args: argparse.Namespace) -> None:
    """One row per partition the group owns or has committed: committed offset, log end
    offset, lag (their difference) and the member the partition is assigned to."""
    from .kafka_admin import latest_offset

    _announce_state(info)
    committed = _committed(admin, info.group_id, args.timeout)
    owners = {tp: member for member in info.members for tp in member.partitions}
    partitions = sorted(set(owners) | set(committed))
    if not partitions:
        if info.state not in ("Empty", *REBALANCING_STATES):
            print(f"\nConsumer group '{info.group_id}' has no offsets.", file=sys.stderr)
        return
    log_end = _log_offsets(admin, partitions, latest_offset(), args.timeout)
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
    _print_table(header, rows, min_widths=widths)


# --- reset-offsets -------------------------------------------------------------------------


def _reset_offsets(admin: AdminClient, args: argparse.Namespace) -> int:
    group_ids = _group_ids(admin, args)
    described = _describe_groups(admin, group_ids, args.timeout)
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
            plan = _plan(admin, args, group_id, exists=info is not None)
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
                _apply(admin, group_id, plan, args.timeout)
            except ToolError as exc:
                failures.append(str(exc))
                del plans[group_id]
    if plans:
        _print_table(
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
    admin: AdminClient, args: argparse.Namespace, group_id: str, exists: bool
) -> dict[TopicPartition, int]:
    """The new committed offset of each partition to reset, kept within the log."""
    from .kafka_admin import OffsetSpec, earliest_offset, latest_offset

    spec = _reset_spec(args)
    needs_committed = args.all_topics or spec in ("shift_by", "to_current")
    committed = _committed(admin, group_id, args.timeout) if exists and needs_committed else {}
    if args.all_topics:
        if not exists:
            raise ToolError(f"consumer group '{group_id}' does not exist")
        partitions = sorted(committed)
    else:
        partitions = _topic_partitions(admin, args.topic, args.timeout)
    if not partitions:
        return {}
    earliest = _known(_log_offsets(admin, partitions, earliest_offset(), args.timeout))
    latest = _known(_log_offsets(admin, partitions, latest_offset(), args.timeout))

    if spec == "to_earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec == "to_latest":
        return {tp: latest[tp] for tp in partitions}
    if spec == "to_current":
        # A partition without a commit gets the log end, as kafka-consumer-groups.sh does.
        return {tp: committed[tp].offset if tp in committed else latest[tp] for tp in partitions}
    if spec in ("to_datetime", "by_duration"):
        if spec == "to_datetime":
            timestamp = _parse_datetime(args.to_datetime)
        else:
            timestamp = int(time.time() * 1000) - _parse_duration(args.by_duration)
        found = _log_offsets(admin, partitions, OffsetSpec.for_timestamp(timestamp), args.timeout)
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


def _apply(
    admin: AdminClient, group_id: str, plan: dict[TopicPartition, int], timeout: float
) -> None:
    """Commit the new offsets as an outside client (generation -1, no member id), which
    the coordinator accepts only while the group has no members."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    offsets = [KafkaTopicPartition(t, p, offset) for (t, p), offset in sorted(plan.items())]
    try:
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, offsets)], request_timeout=timeout
        )
        result = wait(futures[group_id], timeout + 5, f"committing the offsets of {group_id}")
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(
            f"cannot reset the offsets of group '{group_id}': {describe_error(exc)}"
        ) from None
    errors = [tp for tp in result.topic_partitions if tp.error is not None]
    if not errors:
        return
    if any(tp.error.name() == "UNKNOWN_MEMBER_ID" for tp in errors):
        raise ToolError(
            f"consumer group '{group_id}' gained members before the new offsets were"
            " committed; stop its consumers and try again"
        )
    details = ", ".join(
        f"{_tp((tp.topic, tp.partition))}: {describe_error(tp.error)}" for tp in errors
    )
    raise ToolError(f"cannot reset the offsets of group '{group_id}': {details}")


# --- delete --------------------------------------------------------------------------------


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    group_ids = _group_ids(admin, args)
    if not group_ids:
        return 0
    try:
        futures = admin.delete_consumer_groups(group_ids, request_timeout=args.timeout)
    except Exception as exc:
        raise ToolError(f"cannot delete groups: {describe_error(exc)}") from None
    missing: list[str] = []
    failures: dict[str, str] = {}
    for group_id in group_ids:
        try:
            wait(futures[group_id], args.timeout + 5, f"deleting group {group_id}")
        except ToolError:
            raise
        except Exception as exc:
            if error_name(exc) == "GROUP_ID_NOT_FOUND":
                missing.append(group_id)
            elif error_name(exc) == "NON_EMPTY_GROUP":
                failures[group_id] = (
                    f"consumer group '{group_id}' has members and cannot be deleted"
                )
            else:
                failures[group_id] = f"cannot delete group '{group_id}': {describe_error(exc)}"
    deleted = [g for g in group_ids if g not in missing and g not in failures]
    if deleted:
        quoted = ", ".join(f"'{group_id}'" for group_id in deleted)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    messages = ([str(_missing_groups(missing))] if missing else []) + list(failures.values())
    if messages:
        raise ToolError("; ".join(messages))
    return 0


def _delete_offsets(admin: AdminClient, args: argparse.Namespace) -> int:
    from kio.schema.errors import ErrorCode

    from .wire_client import delete_offsets, describe_code

    security = wire_security(args)
    group_id = args.group[0]
    partitions = _topic_partitions(admin, args.topic, args.timeout)
    error, results = delete_offsets(
        args.bootstrap_server, group_id, partitions, args.timeout, security
    )
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
    _print_table(
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
