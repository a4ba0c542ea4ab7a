"""`brook leader-election`: elect the preferred replica, or an unclean leader, for chosen
partitions (like kafka-leader-election.sh, option for option, with its output lines).

    brook leader-election --bootstrap-server localhost:9092 --election-type PREFERRED \\
        --all-topic-partitions

The election goes to the controller as ElectLeaders (broker/tools/admin/elect_leaders.py),
so any Kafka-compatible broker works.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from .common import ToolError, add_connection_arguments, connect, run_tool
from .wire_client import describe_error

CLIENT_ID = "brook-leader-election"
TopicPartition = tuple[str, int]

ELECTION_TYPES = ("PREFERRED", "UNCLEAN")

EPILOG = """\
Exactly one of --topic (with --partition), --all-topic-partitions and --path-to-json-file
chooses the partitions. The JSON file is kafka-leader-election.sh's:
  {"partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]}

examples:
  brook leader-election --bootstrap-server localhost:9092 --election-type PREFERRED \\
      --all-topic-partitions
  brook leader-election --bootstrap-server localhost:9092 --election-type UNCLEAN \\
      --topic orders --partition 0
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "leader-election",
        help="elect preferred or unclean leaders (like kafka-leader-election.sh)",
        description="Elect the preferred replica, or an unclean leader, for partitions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=ELECTION_TYPES,
        help="PREFERRED (the first replica, if in the ISR) or UNCLEAN (any live replica of a"
        " partition without a leader)",
    )
    parser.add_argument("--topic", metavar="NAME", help="the topic (with --partition)")
    parser.add_argument("--partition", type=int, metavar="N", help="the partition of --topic")
    parser.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    parser.add_argument(
        "--path-to-json-file", type=Path, metavar="FILE", help="the partitions, as JSON"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("leader-election", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from .admin.elect_leaders import elect_leaders

    partitions = _chosen_partitions(args)
    with connect(args, CLIENT_ID) as cluster:
        try:
            results = elect_leaders(cluster, args.election_type, partitions)
        except ToolError as exc:
            raise ToolError(f"leader election failed: {exc}") from None
    return _report(args.election_type, results)


def _chosen_partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for (None: all), usage errors before anything connects."""
    chosen = [
        name
        for name, given in (
            ("--topic", args.topic is not None),
            ("--all-topic-partitions", args.all_topic_partitions),
            ("--path-to-json-file", args.path_to_json_file is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise ToolError(
            "exactly one of --topic, --all-topic-partitions and --path-to-json-file is"
            f" required{' (given: ' + ', '.join(chosen) + ')' if chosen else ''}",
            2,
        )
    if args.partition is not None and args.topic is None:
        raise ToolError("--partition needs --topic", 2)
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("--topic needs --partition", 2)
        return [(args.topic, args.partition)]
    if args.all_topic_partitions:
        return None
    return _read_json(args.path_to_json_file)


def _read_json(path: Path) -> list[tuple[str, int]]:
    try:
        document = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot read --path-to-json-file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"--path-to-json-file {path} is not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'--path-to-json-file {path} has no "partitions" list')
    found: list[tuple[str, int]] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int):
            raise ToolError(
                f"--path-to-json-file {path}: {json.dumps(entry)} is not"
                ' {"topic": NAME, "partition": N}'
            )
        if (topic, partition) in found:
            # kafka-leader-election.sh refuses duplicates the same way.
            raise ToolError(f"--path-to-json-file {path}: duplicate partition {topic}-{partition}")
        found.append((topic, partition))
    return found


def _report(election_type: str, results: dict[TopicPartition, tuple[ErrorCode, str | None]]) -> int:
    """kafka-leader-election.sh's lines: the elected, those that needed no election, and
    each failure; exit 1 when any failed."""
    succeeded, noop, failed = [], [], []
    for (topic, partition), (code, message) in sorted(results.items()):
        name = f"{topic}-{partition}"
        if code == ErrorCode.none:
            succeeded.append(name)
        elif code == ErrorCode.election_not_needed:
            noop.append(name)
        else:
            failed.append((name, describe_error(code, message)))
    if succeeded:
        print(
            f"Successfully completed leader election ({election_type}) for partitions"
            f" {', '.join(succeeded)}"
        )
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, reason in failed:
        print(f"Error completing leader election ({election_type}) for partition: {name}: {reason}")
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0
