"""`brook acls`: add, remove and list ACLs, like kafka-acls.sh (option for option, with
its output), through confluent-kafka's AdminClient (CreateAcls, DeleteAcls, DescribeAcls).

    brook acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
        --operation Read --topic orders
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from .common import (
    ToolError,
    add_connection_arguments,
    admin_client,
    describe_error,
    run_tool,
    wait,
)

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
    from confluent_kafka import admin as kadmin

    if args.add or args.remove:
        bindings = _bindings(args, kadmin)
        if not bindings:
            raise ToolError("name a principal (--allow-principal or --deny-principal)", 2)
    admin = admin_client(args)
    if args.add:
        _print_by_pattern("Adding", bindings)
        for binding, future in admin.create_acls(bindings).items():
            _settle(future, args.timeout, f"adding {binding}")
        return _list(admin, args, kadmin, [_exact_filter(b, kadmin) for b in bindings])
    if args.remove:
        if not args.force and input("Are you sure you want to remove ACLs? (y/n) ") != "y":
            return 0
        filters = [_exact_filter(b, kadmin) for b in bindings]
        _print_by_pattern("Removing", bindings)
        for selected, future in admin.delete_acls(filters).items():
            _settle(future, args.timeout, f"removing {selected}")
        return 0
    return _list(admin, args, kadmin, None)


def _settle(future: Any, timeout: float, what: str) -> Any:
    try:
        return wait(future, timeout, what)
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"{what} failed: {describe_error(exc)}") from None


def _resources(args: argparse.Namespace, kadmin: Any) -> list[tuple[Any, str | None]]:
    """(resource type, name) of each resource named (a name of None, for a filter: any)."""
    types = kadmin.ResourceType
    found: list[tuple[Any, str | None]] = [(types.TOPIC, name) for name in args.topic]
    found += [(types.GROUP, name) for name in args.group]
    found += [(types.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.delegation_token or args.user_principal:
        raise ToolError(
            "--delegation-token and --user-principal ACLs are kept by the broker but"
            " confluent-kafka's AdminClient cannot name those resource types",
            2,
        )
    if args.cluster:
        found.append((types.BROKER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace, kadmin: Any, resource_type: Any) -> list[Any]:
    ops = kadmin.AclOperation
    types = kadmin.ResourceType
    chosen: list[Any] = []
    for name in args.operation:
        try:
            chosen.append(ops[_ENUM_NAMES[name.replace("_", "").replace("-", "").lower()]])
        except KeyError:
            raise ToolError(
                f"unknown operation {name!r}: one of {', '.join(OPERATIONS)}", 2
            ) from None
    # kafka-acls.sh's convenience roles.
    if args.producer:
        if resource_type == types.TOPIC:
            chosen += [ops.WRITE, ops.DESCRIBE, ops.CREATE]
        elif resource_type == types.TRANSACTIONAL_ID:
            chosen += [ops.WRITE, ops.DESCRIBE]
        elif resource_type == types.BROKER and args.idempotent:
            chosen.append(ops.IDEMPOTENT_WRITE)
    if args.consumer:
        if resource_type == types.TOPIC:
            chosen += [ops.READ, ops.DESCRIBE]
        elif resource_type == types.GROUP:
            chosen.append(ops.READ)
    return list(dict.fromkeys(chosen))


# Any spelling of an operation (DescribeConfigs, describe-configs, DESCRIBE_CONFIGS) to
# the AdminClient's enum name (DESCRIBE_CONFIGS).
_ENUM_NAMES = {name.lower(): re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() for name in OPERATIONS}


def _bindings(args: argparse.Namespace, kadmin: Any) -> list[Any]:
    pattern = kadmin.ResourcePatternType[args.resource_pattern_type or "LITERAL"]
    if pattern not in (kadmin.ResourcePatternType.LITERAL, kadmin.ResourcePatternType.PREFIXED):
        raise ToolError("ACLs are added and removed with LITERAL or PREFIXED patterns", 2)
    resources = _resources(args, kadmin)
    if args.producer and args.idempotent and not args.cluster:
        resources.append((kadmin.ResourceType.BROKER, CLUSTER_NAME))
    if not resources:
        raise ToolError("name a resource: --topic, --group, --cluster or --transactional-id", 2)
    if (args.producer and not args.topic) or (args.consumer and not (args.topic and args.group)):
        raise ToolError("--producer needs --topic; --consumer needs --topic and --group", 2)
    bindings = []
    for permission, principals, hosts in (
        (kadmin.AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (kadmin.AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for resource_type, name in resources:
            operations = _operations(args, kadmin, resource_type)
            if principals and not operations and not (args.producer or args.consumer):
                raise ToolError("name an operation (--operation, --producer or --consumer)", 2)
            for principal in principals:
                if ":" not in principal:
                    raise ToolError(f"principal {principal!r} is not Type:name", 2)
                for host in hosts:
                    for operation in operations:
                        bindings.append(
                            kadmin.AclBinding(
                                resource_type, name, pattern, principal, host, operation, permission
                            )
                        )
    return bindings


def _exact_filter(binding: Any, kadmin: Any) -> Any:
    return kadmin.AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def _list(admin: Any, args: argparse.Namespace, kadmin: Any, only: list[Any] | None) -> int:
    """kafka-acls.sh's listing: the ACLs of each resource asked about (every one without
    a resource), grouped by resource pattern."""
    if only is not None:
        # After --add: the resources' current ACLs, as kafka-acls.sh prints them.
        keys = {(f.restype, f.name, f.resource_pattern_type) for f in only}
        filters = [
            kadmin.AclBindingFilter(
                t, n, p, None, None, kadmin.AclOperation.ANY, kadmin.AclPermissionType.ANY
            )
            for t, n, p in keys
        ]
    else:
        pattern = kadmin.ResourcePatternType[args.resource_pattern_type or "ANY"]
        resources = _resources(args, kadmin) or [(kadmin.ResourceType.ANY, None)]
        principals = args.principal or [None]
        filters = [
            kadmin.AclBindingFilter(
                t,
                n,
                pattern,
                principal,
                None,
                kadmin.AclOperation.ANY,
                kadmin.AclPermissionType.ANY,
            )
            for t, n in resources
            for principal in principals
        ]
    found: list[Any] = []
    for selected in filters:
        for binding in _settle(admin.describe_acls(selected), args.timeout, "listing ACLs"):
            if binding not in found:
                found.append(binding)
    for pattern, entries in _by_pattern(found).items():
        print(f"Current ACLs for resource `{pattern}`: ")
        for entry in entries:
            print(f" \t{entry} ")
        print()
    return 0


def _print_by_pattern(verb: str, bindings: list[Any]) -> None:
    """kafka-acls.sh's announcement of what it adds or removes, a block per resource."""
    for pattern, entries in _by_pattern(bindings).items():
        print(f"{verb} ACLs for resource `{pattern}`: ")
        for entry in entries:
            print(f" \t{entry} ")
        print()


def _by_pattern(bindings: list[Any]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for b in bindings:
        restype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
        pattern = (
            f"ResourcePattern(resourceType={restype}, name={b.name},"
            f" patternType={b.resource_pattern_type.name})"
        )
        entry = (
            f"(principal={b.principal}, host={b.host}, operation={b.operation.name},"
            f" permissionType={b.permission_type.name})"
        )
        grouped.setdefault(pattern, []).append(entry)
    return grouped
