"""`brook acls`: add, remove and list ACLs, like kafka-acls.sh (option for option, with
its output), through CreateAcls, DeleteAcls and DescribeAcls (broker/tools/admin/acls.py).

    brook acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
        --operation Read --topic orders
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from brook.broker.authorizer.acl import PatternType, PermissionType, ResourceType
from brook.broker.authorizer.operations import AclOperation

from .common import ToolError, add_connection_arguments, connect, run_tool

if TYPE_CHECKING:
    from .admin.acls import AclBinding
    from .wire_client import KafkaCluster

CLIENT_ID = "brook-acls"
OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
    "CreateTokens",
    "DescribeTokens",
)
PATTERN_TYPES = ("ANY", "MATCH", "LITERAL", "PREFIXED")
CLUSTER_NAME = "kafka-cluster"

EPILOG = """\
Resources: --topic, --group, --transactional-id, --delegation-token, --user-principal
(each repeatable, `*` for all) and --cluster. --resource-pattern-type is LITERAL when
adding or removing, ANY when listing (MATCH lists every ACL that applies to a name).
--producer and --consumer add the operations each role needs, as kafka-acls.sh does.

examples:
  brook acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
      --operation Read --operation Describe --topic orders
  brook acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
      --consumer --topic orders --group billing
  brook acls --bootstrap-server localhost:9092 --add --allow-principal User:bob \\
      --producer --topic events- --resource-pattern-type PREFIXED
  brook acls --bootstrap-server localhost:9092 --list --topic orders
  brook acls --bootstrap-server localhost:9092 --remove --force --allow-principal User:alice \\
      --operation Read --topic orders
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "acls",
        help="add, remove and list ACLs (like kafka-acls.sh)",
        description="Add, remove and list ACLs (the broker needs authorizer.class.name).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    many: dict[str, Any] = {"action": "append", "default": []}
    parser.add_argument("--topic", metavar="NAME", help="a topic (repeatable)", **many)
    parser.add_argument("--group", metavar="NAME", help="a consumer group (repeatable)", **many)
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument(
        "--transactional-id", metavar="ID", help="a transactional id (repeatable)", **many
    )
    parser.add_argument(
        "--delegation-token", metavar="ID", help="a delegation token (repeatable)", **many
    )
    parser.add_argument("--user-principal", metavar="USER", help="a user (repeatable)", **many)
    parser.add_argument(
        "--resource-pattern-type",
        type=str.upper,
        choices=PATTERN_TYPES,
        help="how resource names match (LITERAL to add/remove, ANY to list by default)",
    )
    parser.add_argument("--allow-principal", metavar="P", help="Type:name to allow", **many)
    parser.add_argument("--deny-principal", metavar="P", help="Type:name to deny", **many)
    parser.add_argument("--allow-host", metavar="HOST", help="host to allow from", **many)
    parser.add_argument("--deny-host", metavar="HOST", help="host to deny from", **many)
    parser.add_argument("--principal", metavar="P", help="list only this principal's", **many)
    parser.add_argument(
        "--operation",
        metavar="OP",
        help=f"an operation (repeatable): {', '.join(OPERATIONS)}",
        **many,
    )
    parser.add_argument("--producer", action="store_true", help="a producer's operations")
    parser.add_argument("--consumer", action="store_true", help="a consumer's operations")
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IdempotentWrite"
    )
    parser.add_argument(
        "--force", action="store_true", help="remove without asking for confirmation"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("acls", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from .admin.acls import create_acls, delete_acls

    bindings: list[AclBinding] = []
    if args.add or args.remove:
        bindings = _bindings(args)
        if not bindings:
            raise ToolError("name a principal (--allow-principal or --deny-principal)", 2)
    with connect(args, CLIENT_ID) as cluster:
        if args.add:
            _print_by_pattern("Adding", bindings)
            for binding, error in zip(bindings, create_acls(cluster, bindings), strict=False):
                if error is not None:
                    raise ToolError(f"adding {_text(binding)} failed: {error}")
            return _list(cluster, args, bindings)
        if args.remove:
            if not args.force and input("Are you sure you want to remove ACLs? (y/n) ") != "y":
                return 0
            _print_by_pattern("Removing", bindings)
            for binding, error in zip(bindings, delete_acls(cluster, bindings), strict=False):
                if error is not None:
                    raise ToolError(f"removing {_text(binding)} failed: {error}")
            return 0
        return _list(cluster, args, None)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str | None]]:
    """(resource type, name) of each resource named (a name of None, for a filter: any)."""
    found: list[tuple[ResourceType, str | None]] = [
        (ResourceType.TOPIC, name) for name in args.topic
    ]
    found += [(ResourceType.GROUP, name) for name in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    found += [(ResourceType.DELEGATION_TOKEN, name) for name in args.delegation_token]
    found += [(ResourceType.USER, name) for name in args.user_principal]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    chosen: list[AclOperation] = []
    for name in args.operation:
        try:
            chosen.append(AclOperation[_ENUM_NAMES[name.replace("_", "").replace("-", "").lower()]])
        except KeyError:
            raise ToolError(
                f"unknown operation {name!r}: one of {', '.join(OPERATIONS)}", 2
            ) from None
    # kafka-acls.sh's convenience roles.
    if args.producer:
        if resource_type == ResourceType.TOPIC:
            chosen += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
        elif resource_type == ResourceType.TRANSACTIONAL_ID:
            chosen += [AclOperation.WRITE, AclOperation.DESCRIBE]
        elif resource_type == ResourceType.CLUSTER and args.idempotent:
            chosen.append(AclOperation.IDEMPOTENT_WRITE)
    if args.consumer:
        if resource_type == ResourceType.TOPIC:
            chosen += [AclOperation.READ, AclOperation.DESCRIBE]
        elif resource_type == ResourceType.GROUP:
            chosen.append(AclOperation.READ)
    return list(dict.fromkeys(chosen))


# Any spelling of an operation (DescribeConfigs, describe-configs, DESCRIBE_CONFIGS) to
# its enum name (DESCRIBE_CONFIGS).
_ENUM_NAMES = {name.lower(): re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() for name in OPERATIONS}


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    from .admin.acls import AclBinding

    pattern = PatternType[args.resource_pattern_type or "LITERAL"]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ToolError("ACLs are added and removed with LITERAL or PREFIXED patterns", 2)
    resources = _resources(args)
    if args.producer and args.idempotent and not args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if not resources:
        raise ToolError(
            "name a resource: --topic, --group, --cluster, --transactional-id,"
            " --delegation-token or --user-principal",
            2,
        )
    if (args.producer and not args.topic) or (args.consumer and not (args.topic and args.group)):
        raise ToolError("--producer needs --topic; --consumer needs --topic and --group", 2)
    bindings = []
    for permission, principals, hosts in (
        (PermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (PermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for resource_type, name in resources:
            operations = _operations(args, resource_type)
            if principals and not operations and not (args.producer or args.consumer):
                raise ToolError("name an operation (--operation, --producer or --consumer)", 2)
            for principal in principals:
                if ":" not in principal:
                    raise ToolError(f"principal {principal!r} is not Type:name", 2)
                for host in hosts:
                    for operation in operations:
                        bindings.append(
                            AclBinding(
                                resource_type, name, pattern, principal, host, operation, permission
                            )
                        )
    return bindings


def _list(cluster: KafkaCluster, args: argparse.Namespace, only: list[AclBinding] | None) -> int:
    """kafka-acls.sh's listing: the ACLs of each resource asked about (every one without
    a resource), grouped by resource pattern."""
    from .admin.acls import AclBinding, describe_acls

    every_acl = (AclOperation.ANY, PermissionType.ANY)
    if only is not None:
        # After --add: the resources' current ACLs, as kafka-acls.sh prints them.
        keys = dict.fromkeys((b.resource_type, b.name, b.pattern_type) for b in only)
        filters = [AclBinding(t, n, p, None, None, *every_acl) for t, n, p in keys]
    else:
        pattern = PatternType[args.resource_pattern_type or "ANY"]
        resources: list[tuple[ResourceType, str | None]] = _resources(args) or [
            (ResourceType.ANY, None)
        ]
        principals: list[str | None] = args.principal or [None]
        filters = [
            AclBinding(t, n, pattern, principal, None, *every_acl)
            for t, n in resources
            for principal in principals
        ]
    found: list[AclBinding] = []
    for selected in filters:
        try:
            listed = describe_acls(cluster, selected)
        except ToolError as exc:
            raise ToolError(f"listing ACLs failed: {exc}") from None
        for binding in listed:
            if binding not in found:
                found.append(binding)
    for pattern_text, entries in _by_pattern(found).items():
        print(f"Current ACLs for resource `{pattern_text}`: ")
        for entry in entries:
            print(f" \t{entry} ")
        print()
    return 0


def _print_by_pattern(verb: str, bindings: list[AclBinding]) -> None:
    """kafka-acls.sh's announcement of what it adds or removes, a block per resource."""
    for pattern, entries in _by_pattern(bindings).items():
        print(f"{verb} ACLs for resource `{pattern}`: ")
        for entry in entries:
            print(f" \t{entry} ")
        print()


def _pattern_text(b: AclBinding) -> str:
    return (
        f"ResourcePattern(resourceType={b.resource_type.name}, name={b.name},"
        f" patternType={b.pattern_type.name})"
    )


def _entry_text(b: AclBinding) -> str:
    return (
        f"(principal={b.principal}, host={b.host}, operation={b.operation.name},"
        f" permissionType={b.permission.name})"
    )


def _text(b: AclBinding) -> str:
    return f"{_pattern_text(b)} {_entry_text(b)}"


def _by_pattern(bindings: list[AclBinding]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for b in bindings:
        grouped.setdefault(_pattern_text(b), []).append(_entry_text(b))
    return grouped
