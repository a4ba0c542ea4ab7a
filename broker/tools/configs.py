"""`brook configs`: describe and alter topic and broker configs, like kafka-configs.sh.

    brook configs --bootstrap-server HOST:PORT --describe --entity-type topics --entity-name T
    Dynamic configs for topic T are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}

Describing goes through DescribeConfigs; altering through IncrementalAlterConfigs (SET
for --add-config, DELETE for --delete-config), which changes only the keys named and
leaves the others as they are (broker/tools/admin/configs.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from brook.storage.checkpoints import parse_java_properties

from .common import (
    ToolError,
    add_action_arguments,
    add_connection_arguments,
    chosen_action,
    connect,
    parse_key_values,
    run_tool,
    split_config_list,
)
from .wire_client import KafkaCluster, UnservedRequestError, describe_error

if TYPE_CHECKING:
    from .admin.configs import ConfigEntry, Resource
    from .client_quotas import Entity as QuotaEntity

CLIENT_ID = "brook-configs"

ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")

EPILOG = """\
examples (HOST is e.g. localhost:9092):
  brook configs --bootstrap-server HOST --describe --entity-type topics --entity-name orders
  brook configs --bootstrap-server HOST --describe --topic orders --all
  brook configs --bootstrap-server HOST --alter --entity-type topics --entity-name orders \\
      --add-config retention.ms=86400000,cleanup.policy=[compact,delete]
  brook configs --bootstrap-server HOST --alter --topic orders --delete-config retention.ms
  brook configs --bootstrap-server HOST --describe --entity-type brokers --entity-name 0
  brook configs --bootstrap-server HOST --alter --broker 0 --add-config log.retention.ms=3600000
  brook configs --bootstrap-server HOST --alter --entity-type users --entity-name alice \\
      --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
  brook configs --bootstrap-server HOST --describe --entity-type users

--describe lists only the configs set on the entity itself (a topic's overrides, a
broker's dynamic configs, the cluster-wide broker defaults); --all lists every config
with its value and source. Without --entity-name, --describe covers every topic (or
every broker, and the cluster-wide broker defaults).
"""


@dataclass(frozen=True)
class Entity:
    kind: str  # "topic" or "broker"
    name: str  # "" for the cluster-wide broker default

    def title(self) -> str:
        if self.kind == "broker" and not self.name:
            return "the default broker config of the cluster"
        return f"{self.kind} {self.name}"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "configs",
        help="describe or alter topic and broker configs (like kafka-configs.sh)",
        description="Describe or alter the configs of topics and brokers on any"
        " Kafka-compatible broker.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_action_arguments(
        parser,
        {
            "describe": "show configs",
            "alter": "change configs with --add-config and/or --delete-config",
        },
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--entity-type",
        choices=ENTITY_TYPES,
        action="append",
        help="topics, brokers, users (quotas, SCRAM credentials), clients (quotas) or ips"
        " (connection_creation_rate); give users then clients, each with its name, for a"
        " (user, client id) quota",
    )
    parser.add_argument(
        "--entity-name",
        metavar="NAME",
        action="append",
        help="a topic name, a broker id, a user or a client id",
    )
    parser.add_argument(
        "--entity-default",
        action="append_const",
        const=True,
        help="the cluster-wide default of --entity-type brokers, or the default user or client id",
    )
    parser.add_argument(
        "--topic", metavar="NAME", help="short for --entity-type topics --entity-name NAME"
    )
    parser.add_argument(
        "--broker", metavar="ID", help="short for --entity-type brokers --entity-name ID"
    )
    parser.add_argument(
        "--broker-defaults",
        action="store_true",
        help="short for --entity-type brokers --entity-default",
    )
    parser.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K2=V2]",
        help="configs to set; a list value goes in brackets: cleanup.policy=[compact,delete]",
    )
    parser.add_argument(
        "--add-config-file", type=Path, metavar="FILE", help="a properties file of configs to set"
    )
    parser.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K2]",
        help="configs to remove, going back to the default",
    )
    parser.add_argument(
        "--all", action="store_true", help="--describe every config, defaults included"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_tool("configs", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    action = chosen_action(args)
    types = args.entity_type or []
    if any(kind in ("users", "clients", "ips") for kind in types):
        return _run_quota_entities(args, action, types)
    if len(types) > 1 or len(args.entity_name or []) > 1 or len(args.entity_default or []) > 1:
        raise ToolError("only users and clients may be named together", 2)
    args.entity_type = types[0] if types else None
    args.entity_name = args.entity_name[0] if args.entity_name else None
    args.entity_default = bool(args.entity_default)
    kind, name = _entity(args)
    if action == "alter":
        sets, deletes = _changes(args)
        if name is None:
            raise ToolError("--alter needs --entity-name", 2)
        with connect(args, CLIENT_ID) as cluster:
            return _alter(cluster, Entity(kind, name), sets, deletes)
    if args.add_config or args.delete_config or args.add_config_file:
        raise ToolError("--add-config and --delete-config are only for --alter", 2)
    with connect(args, CLIENT_ID) as cluster:
        if name is not None:
            entities = [Entity(kind, name)]
        else:
            entities = _all_entities(cluster, kind)
            if kind == "broker":
                entities.append(Entity("broker", ""))  # and the cluster-wide defaults
        for entity in entities:
            _describe(cluster, entity, args)
    return 0


def _quota_entity(args: argparse.Namespace, types: list[str]) -> tuple[QuotaEntity, list[str]]:
    """The quota entity named, as (type, name or None for the default) pairs in the
    order of --entity-type, and the types given without a name (--describe: all)."""
    from .client_quotas import QUOTA_ENTITY_TYPES

    if len(types) > 2 or len(set(types)) != len(types) or "topics" in types or "brokers" in types:
        raise ToolError("name users, clients, or users then clients", 2)
    if "ips" in types and len(types) > 1:
        raise ToolError("ips cannot be combined with users or clients", 2)
    if types == ["clients", "users"]:
        types = ["users", "clients"]  # a (user, client id) pair, whichever order given
    # --entity-name and --entity-default are taken in the order given, one per type.
    names = list(args.entity_name or [])
    defaults = len(args.entity_default or [])
    if len(names) + defaults > len(types):
        raise ToolError("more --entity-name/--entity-default than --entity-type", 2)
    entity: QuotaEntity = []
    unnamed = []
    for kind in types:
        if names:
            entity.append((QUOTA_ENTITY_TYPES[kind], names.pop(0)))
        elif defaults:
            defaults -= 1
            entity.append((QUOTA_ENTITY_TYPES[kind], None))
        else:
            unnamed.append(QUOTA_ENTITY_TYPES[kind])
    return entity, unnamed


def _run_quota_entities(args: argparse.Namespace, action: str, types: list[str]) -> int:
    """Client quotas (broker/tools/client_quotas.py) and, for a user alone, its SCRAM
    credentials (broker/tools/user_scram.py), as kafka-configs.sh mixes them."""
    from . import client_quotas, user_scram

    entity, unnamed = _quota_entity(args, types)
    scram_user = (
        entity[0][1] if len(entity) == 1 and entity[0][0] == "user" and not unnamed else None
    )
    if action == "alter":
        if unnamed:
            raise ToolError("--alter needs --entity-name or --entity-default for each type", 2)
        sets, deletes = _changes(args)
        scram_sets = {k: v for k, v in sets.items() if k.startswith("SCRAM-")}
        scram_deletes = [k for k in deletes if k.startswith("SCRAM-")]
        quota_sets = {k: v for k, v in sets.items() if k not in scram_sets}
        quota_deletes = [k for k in deletes if k not in scram_deletes]
        if (scram_sets or scram_deletes) and scram_user is None:
            raise ToolError("SCRAM credentials belong to a named user alone", 2)
        if quota_sets or quota_deletes:
            client_quotas.alter(args, entity, quota_sets, quota_deletes)
        if scram_sets or scram_deletes:
            assert scram_user is not None
            return user_scram.alter(args, scram_user, scram_sets, scram_deletes)
        print(f"Completed updating config for {_quota_title(entity)}.")
        return 0
    if args.add_config or args.delete_config or args.add_config_file:
        raise ToolError("--add-config and --delete-config are only for --alter", 2)
    client_quotas.describe(args, entity, unnamed)
    if types == ["users"] and (scram_user is not None or unnamed):
        return user_scram.describe(args, scram_user)
    return 0


def _quota_title(entity: QuotaEntity) -> str:
    """How kafka-configs.sh names what it altered."""
    parts = [f"{kind} {name}" if name is not None else f"default {kind}" for kind, name in entity]
    return ", ".join(parts)


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(kind, name) from --entity-type/--entity-name/--entity-default or the shortcuts."""
    chosen = []
    if args.entity_type is not None:
        kind = "topic" if args.entity_type == "topics" else "broker"
        if args.entity_default:
            if kind != "broker":
                raise ToolError("--entity-default is only for --entity-type brokers", 2)
            if args.entity_name is not None:
                raise ToolError("give --entity-name or --entity-default, not both", 2)
            chosen.append((kind, ""))
        else:
            chosen.append((kind, args.entity_name))
    elif args.entity_name is not None or args.entity_default:
        raise ToolError("--entity-name and --entity-default need --entity-type", 2)
    if args.topic is not None:
        chosen.append(("topic", args.topic))
    if args.broker is not None:
        chosen.append(("broker", args.broker))
    if args.broker_defaults:
        chosen.append(("broker", ""))
    if not chosen:
        raise ToolError("name what to configure: --entity-type topics|brokers (or --topic)", 2)
    if len(chosen) > 1:
        raise ToolError("name one entity: --entity-type/--entity-name, --topic or --broker", 2)
    kind, name = chosen[0]
    if kind == "broker" and name and not name.isdigit():
        raise ToolError(f"broker {name!r} is not a broker id (an integer)", 2)
    return kind, name


def _changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    sets = parse_key_values(args.add_config, "--add-config")
    if args.add_config_file is not None:
        try:
            sets.update(parse_java_properties(args.add_config_file.read_text("utf-8")))
        except OSError as exc:
            raise ToolError(f"cannot read --add-config-file: {exc}", 2) from None
    deletes = [name for item in args.delete_config for name in split_config_list(item)]
    if not sets and not deletes:
        raise ToolError("--alter needs --add-config, --add-config-file or --delete-config", 2)
    both = sorted(set(sets) & set(deletes))
    if both:
        raise ToolError(f"{', '.join(both)} is both added and deleted", 2)
    return sets, deletes


def _resource(entity: Entity) -> Resource:
    from .admin.configs import BROKER, TOPIC

    return (TOPIC if entity.kind == "topic" else BROKER, entity.name)


def _all_entities(cluster: KafkaCluster, kind: str) -> list[Entity]:
    metadata = cluster.metadata(None if kind == "topic" else ())
    if kind == "topic":
        return [Entity("topic", name) for name in sorted({*metadata.topics, *metadata.missing})]
    return [Entity("broker", str(broker)) for broker in sorted(metadata.brokers)]


def _fetch(cluster: KafkaCluster, entity: Entity) -> dict[str, ConfigEntry]:
    from .admin.configs import describe_configs

    resource = _resource(entity)
    try:
        result = describe_configs(cluster, [resource]).get(resource)
    except UnservedRequestError as exc:
        raise ToolError(
            f"cannot describe the configs of {entity.title()}: the broker does not serve"
            f" this API ({exc})"
        ) from None
    except ToolError as exc:
        raise ToolError(f"cannot describe the configs of {entity.title()}: {exc}") from None
    if result is None:
        raise ToolError(
            f"cannot describe the configs of {entity.title()}: the broker did not answer for it"
        )
    if result.error != ErrorCode.none:
        raise ToolError(
            f"cannot describe the configs of {entity.title()}:"
            f" {describe_error(result.error, result.message)}"
        )
    return result.entries


def _describe(cluster: KafkaCluster, entity: Entity, args: argparse.Namespace) -> None:
    from .admin.configs import source_name

    entries = _fetch(cluster, entity)
    if args.all:
        shown = list(entries.values())
        print(f"All configs for {entity.title()} are:")
    else:
        # Only what was set on this entity itself, as kafka-configs.sh shows it.
        if entity.kind == "topic":
            wanted = "DYNAMIC_TOPIC_CONFIG"
        elif entity.name:
            wanted = "DYNAMIC_BROKER_CONFIG"
        else:
            wanted = "DYNAMIC_DEFAULT_BROKER_CONFIG"
        shown = [entry for entry in entries.values() if source_name(entry.source) == wanted]
        if entity.kind == "broker" and not entity.name:
            print("Default configs for brokers in the cluster are:")
        else:
            print(f"Dynamic configs for {entity.title()} are:")
    for entry in sorted(shown, key=lambda e: e.name):
        print(f"  {_entry_line(entry)}")


def _value(value: str | None, sensitive: bool) -> str:
    # A sensitive value never leaves the broker; Kafka's tool prints null for it.
    return "null" if sensitive or value is None else value


def _entry_line(entry: ConfigEntry) -> str:
    from .admin.configs import source_name

    synonyms = ", ".join(
        f"{source_name(synonym.source)}:{synonym.name}={_value(synonym.value, entry.is_sensitive)}"
        for synonym in entry.synonyms
    )
    return (
        f"{entry.name}={_value(entry.value, entry.is_sensitive)}"
        f" sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"
    )


def _alter(cluster: KafkaCluster, entity: Entity, sets: dict[str, str], deletes: list[str]) -> int:
    from .admin.configs import incremental_alter_configs

    try:
        code, message = incremental_alter_configs(cluster, _resource(entity), sets, deletes)
    except UnservedRequestError as exc:
        raise ToolError(
            f"cannot alter the configs of {entity.title()}: the broker does not serve this"
            f" API ({exc})"
        ) from None
    except ToolError as exc:
        raise ToolError(f"cannot alter the configs of {entity.title()}: {exc}") from None
    if code != ErrorCode.none:
        raise ToolError(
            f"cannot alter the configs of {entity.title()}: {describe_error(code, message)}"
        )
    if entity.kind == "broker" and not entity.name:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {entity.title()}.")
    return 0
