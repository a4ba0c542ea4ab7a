"""`brook share-groups`: list, describe, reset the start offsets of and delete share
groups (KIP-932).

Shaped like Kafka 4's kafka-share-groups.sh, option for option, with its tables, so that
an operator's habits and scripts carry over:

    GROUP   TOPIC   PARTITION  START-OFFSET  LAG
    jobs    orders  0          1500          25

Share groups are read and changed through Kafka's admin requests (ListGroups,
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets, DeleteGroups; ListOffsets for --to-earliest, --to-latest and
--to-datetime), so any Kafka 4.2+ broker works.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kio.schema.errors import ErrorCode

from .common import (
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    run_admin_action,
    run_tool,
)
from .groups import (
    MISSING,
    assignment_text,
    listed_groups,
    log_offsets,
    parse_datetime,
    print_table,
    topic_partitions,
)
from .wire_client import KafkaCluster, describe_code

CLIENT_ID = "brook-share-groups"
TopicPartition = tuple[str, int]

ACTION_HELP = {
    "list": "list the share groups, one a line (with --state: their states too)",
    "describe": "a share group's start offset and lag per partition (or --members, --state)",
    "reset-offsets": "move an inactive share group's start offsets (a dry run unless --execute)",
    "delete": "delete inactive share groups and their state",
    "delete-offsets": "make an inactive share group forget --topic",
}
STATES = ("Empty", "Stable", "Dead")

EPILOG = """\
The action is a flag, as kafka-share-groups.sh takes it, or a word: `brook share-groups list`.

examples (HOST is e.g. localhost:9092):
  brook share-groups --bootstrap-server HOST --list --state
  brook share-groups --bootstrap-server HOST --describe --group jobs
  brook share-groups --bootstrap-server HOST --describe --group jobs --members --verbose
  brook share-groups --bootstrap-server HOST --reset-offsets --group jobs --topic orders \\
      --to-earliest --execute
  brook share-groups --bootstrap-server HOST --delete --group jobs

--reset-offsets prints the new start offsets and changes nothing unless --execute is given;
it refuses a group that has members (stop its consumers first).
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "share-groups",
        help="list, describe, reset offsets of or delete share groups (like kafka-share-groups.sh)",
        description="List, describe, reset the start offsets of and delete share groups"
        " (KIP-932) on any Kafka-compatible broker.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_action_arguments(parser, ACTION_HELP)
    add_connection_arguments(parser)
    parser.add_argument(
        "--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)"
    )
    parser.add_argument(
        "--all-groups", action="store_true", help="every share group (--describe, --delete)"
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
        help="--reset-offsets every partition the group reads",
    )
    views = parser.add_mutually_exclusive_group()
    views.add_argument(
        "--offsets", action="store_true", help="--describe start offsets and lag (the default)"
    )
    views.add_argument(
        "--members",
        action="store_true",
        help="--describe the members: consumer id, host, client id and partitions",
    )
    views.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATE[,STATE...]",
        help="with --describe: coordinator, state and member count; with --list: each"
        " group's state, only the groups in the STATEs if given (Empty, Stable, Dead)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="--describe more: epochs with --members, --state"
    )
    specs = parser.add_mutually_exclusive_group()
    specs.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    specs.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    specs.add_argument(
        "--to-current", action="store_true", help="reset to the current start offset"
    )
    specs.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    specs.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first offset whose timestamp is at or after this time (UTC"
        " unless it ends in Z or +HH:MM)",
    )
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument(
        "--dry-run", action="store_true", help="--reset-offsets: only print the plan (default)"
    )
    runs.add_argument("--execute", action="store_true", help="--reset-offsets: apply the plan")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("share-groups", lambda: _run(args))


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


def _check_options(action: str, args: argparse.Namespace) -> None:
    """Refuse option combinations kafka-share-groups.sh refuses, before connecting."""
    if action == "list":
        if args.group or args.all_groups:
            raise ToolError("--list takes no --group; use --describe for a group", 2)
        return
    if action in ("reset-offsets", "delete-offsets") and (len(args.group) != 1 or args.all_groups):
        raise ToolError(f"--{action} needs exactly one --group", 2)
    if action in ("describe", "delete") and not args.group and not args.all_groups:
        raise ToolError(f"--{action} needs --group or --all-groups", 2)
    if action == "delete-offsets" and not args.topic:
        raise ToolError("--delete-offsets needs --topic", 2)
    if action == "reset-offsets":
        if not args.topic and not args.all_topics:
            raise ToolError("--reset-offsets needs --topic or --all-topics", 2)
        if _reset_spec(args) is None:
            raise ToolError(
                "--reset-offsets needs one of --to-earliest, --to-latest, --to-current,"
                " --to-offset, --to-datetime",
                2,
            )
    if args.state and action != "list":
        raise ToolError("--state takes states only with --list", 2)


def _reset_spec(args: argparse.Namespace) -> str | None:
    for name in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, name):
            return name
    for name in ("to_offset", "to_datetime"):
        if getattr(args, name) is not None:
            return name
    return None


def _share_groups(cluster: KafkaCluster, states: list[str] | None = None) -> list[Any]:
    return [
        listing
        for listing in listed_groups(cluster, states, with_types=True)
        if listing.group_type == "share"
    ]


def _group_ids(cluster: KafkaCluster, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listing.group_id for listing in _share_groups(cluster)]
    return list(dict.fromkeys(args.group))


# --- list and describe -----------------------------------------------------------------


def _list(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    if args.state is None:
        for listing in _share_groups(cluster):
            print(listing.group_id)
        return 0
    wanted = [state.strip() for state in args.state.split(",") if state.strip()]
    by_lower = {state.lower(): state for state in STATES}
    unknown = [state for state in wanted if state.lower() not in by_lower]
    if unknown:
        raise ToolError(f"--state {','.join(unknown)}: the states are {', '.join(STATES)}", 2)
    states = [by_lower[state.lower()] for state in wanted] or None
    rows = [[listing.group_id, listing.state] for listing in _share_groups(cluster, states)]
    print_table(["GROUP", "STATE"], rows, min_widths=[15], blank_line=False)
    return 0


def _describe(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.share_groups import share_group_describe

    missing = []
    for group_id in _group_ids(cluster, args):
        group = share_group_describe(cluster, group_id)
        if group is None:
            missing.append(group_id)
            continue
        if args.state is not None:
            _describe_state(group, args.verbose)
        elif args.members:
            _describe_members(group, args.verbose)
        else:
            _describe_offsets(cluster, group_id)
    if missing:
        raise ToolError(f"share group {', '.join(repr(g) for g in missing)} not found")
    return 0


def _describe_state(group: Any, verbose: bool) -> None:
    coordinator = group.coordinator
    where = f"{coordinator.host}:{coordinator.port}  ({coordinator.node_id})"
    header = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row: list[object] = [group.group_id, where, group.state]
    widths = [15, 25, 15]
    if verbose:
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [group.group_epoch, group.assignment_epoch]
        widths += [12, 17]
    print_table([*header, "#MEMBERS"], [[*row, len(group.members)]], min_widths=widths)


def _describe_members(group: Any, verbose: bool) -> None:
    if not group.members:
        print(f"\nShare group '{group.group_id}' has no active members.", file=sys.stderr)
        return
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    header += ["MEMBER-EPOCH"] if verbose else []
    rows = []
    for member in group.members:
        row: list[object] = [group.group_id, member.member_id, member.host, member.client_id]
        row.append(len(member.assignment))
        if verbose:
            row.append(member.member_epoch)
        row.append(assignment_text(list(member.assignment)) or "")
        rows.append(row)
    widths = [15, 15, 15, 15, 12, *([13] if verbose else [])]
    print_table([*header, "ASSIGNMENT"], rows, min_widths=widths)


def _describe_offsets(cluster: KafkaCluster, group_id: str) -> None:
    from .admin.share_groups import describe_share_group_offsets

    offsets = describe_share_group_offsets(cluster, group_id)
    if not offsets:
        print(f"\nShare group '{group_id}' has no offset information.")
        return
    rows = [
        [
            group_id,
            topic,
            index,
            offset.start_offset if offset.start_offset >= 0 else MISSING,
            offset.lag if offset.lag >= 0 else MISSING,
        ]
        for (topic, index), offset in sorted(offsets.items())
    ]
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], rows, min_widths=[15, 15, 10, 13]
    )


# --- reset-offsets ---------------------------------------------------------------------


def _reset_offsets(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.list_offsets import EARLIEST, LATEST
    from .admin.share_groups import (
        alter_share_group_offsets,
        describe_share_group_offsets,
        share_group_describe,
    )

    (group_id,) = args.group
    group = share_group_describe(cluster, group_id)
    if group is not None and group.members:
        raise ToolError(
            f"share group '{group_id}' has active members: stop them before resetting its offsets"
        )
    current = describe_share_group_offsets(cluster, group_id) if group is not None else {}
    partitions = sorted(current) if args.all_topics else topic_partitions(cluster, args.topic)
    spec = _reset_spec(args)
    plan: dict[TopicPartition, int | None]
    if spec == "to_earliest":
        plan = dict(log_offsets(cluster, partitions, EARLIEST))
    elif spec == "to_latest":
        plan = dict(log_offsets(cluster, partitions, LATEST))
    elif spec == "to_datetime":
        plan = dict(log_offsets(cluster, partitions, parse_datetime(args.to_datetime)))
        latest = log_offsets(cluster, partitions, LATEST)
        plan = {
            tp: offset if offset is not None and offset >= 0 else latest[tp]
            for tp, offset in plan.items()
        }
    elif spec == "to_current":
        plan = {tp: current[tp].start_offset if tp in current else None for tp in partitions}
    else:
        plan = dict.fromkeys(partitions, args.to_offset)
    known = {tp: offset for tp, offset in plan.items() if offset is not None and offset >= 0}
    rows = [[group_id, tp[0], tp[1], offset] for tp, offset in sorted(known.items())]
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, min_widths=[15, 15, 10])
    if args.execute and known:
        errors = alter_share_group_offsets(cluster, group_id, known)
        failed = {tp: code for tp, code in errors.items() if code != ErrorCode.none}
        if failed:
            raise ToolError(
                "could not reset "
                + ", ".join(f"{t}-{p}: {describe_code(c)}" for (t, p), c in sorted(failed.items()))
            )
    return 0


# --- delete --------------------------------------------------------------------------------


def _delete(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.groups import delete_groups

    group_ids = _group_ids(cluster, args)
    results = delete_groups(cluster, group_ids)
    failed = {g: code for g, code in results.items() if code != ErrorCode.none}
    deleted = [g for g in group_ids if g not in failed]
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested share groups ({names}) was successful.")
    for group_id, code in failed.items():
        print(
            f"Deletion of share group '{group_id}' failed: {describe_code(code)}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _delete_offsets(cluster: KafkaCluster, args: argparse.Namespace) -> int:
    from .admin.share_groups import delete_share_group_offsets

    (group_id,) = args.group
    topics = list(dict.fromkeys(text.partition(":")[0] for text in args.topic))
    results = delete_share_group_offsets(cluster, group_id, topics)
    rows = [
        [
            topic,
            "Successful" if code == ErrorCode.none else f"Error: {message or describe_code(code)}",
        ]
        for topic, (code, message) in results.items()
    ]
    print_table(["TOPIC", "STATUS"], rows, min_widths=[15])
    return 1 if any(code != ErrorCode.none for code, _ in results.values()) else 0
