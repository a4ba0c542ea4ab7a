"""What the networked tools share: the connection to the cluster, argument parsing
helpers, errors.

Every failure a user can cause (an unreachable broker, an unknown topic, a bad option)
ends as one `ToolError` line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from brook.storage.checkpoints import parse_java_properties

if TYPE_CHECKING:
    from brook.broker.security.client_security import ClientSecurity

    from .wire_client import KafkaCluster

DEFAULT_TIMEOUT_S = 30.0
# Kafka's own internal topics (Topic.isInternal): hidden by --exclude-internal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class ToolError(Exception):
    """A failure to report as one line; the tool exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_action_arguments(parser: argparse.ArgumentParser, actions: dict[str, str]) -> None:
    """The action as a word (`brook topics list`) or as a flag (`--list`), as Kafka's
    tools take it; `actions` maps each action to its help text."""
    names = list(actions)
    parser.set_defaults(actions=names)
    parser.add_argument(
        "action_word",
        nargs="?",
        choices=names,
        metavar="ACTION",
        help=f"{', '.join(names[:-1])} or {names[-1]} (the same as the flags)",
    )
    flags = parser.add_mutually_exclusive_group()
    for action, text in actions.items():
        flags.add_argument(
            f"--{action}", dest="action_flag", action="store_const", const=action, help=text
        )


def chosen_action(args: argparse.Namespace) -> str:
    """The one action given as a word or a flag; a usage error otherwise."""
    if args.action_word and args.action_flag and args.action_word != args.action_flag:
        raise ToolError(f"give one action, not {args.action_word} and --{args.action_flag}", 2)
    action: str | None = args.action_flag or args.action_word
    if action is None:
        flags = [f"--{name}" for name in args.actions]
        raise ToolError(f"give one action: {', '.join(flags[:-1])} or {flags[-1]}", 2)
    return action


def run_admin_action(
    args: argparse.Namespace,
    check_options: Callable[[str, argparse.Namespace], None],
    actions: dict[str, Callable[[KafkaCluster, argparse.Namespace], int]],
    client_id: str,
) -> int:
    """Run the chosen action against the cluster, its options checked before anything
    connects (a usage error should not wait for a broker)."""
    action = chosen_action(args)
    check_options(action, args)
    with connect(args, client_id) as cluster:
        return actions[action](cluster, args)


class _ZooKeeperRefused(argparse.Action):
    """--zookeeper, which Kafka's tools dropped in 3.0: a usage error that says so, rather
    than argparse taking its value for the next positional ("invalid choice")."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        parser.error(
            "--zookeeper is not supported (Kafka's tools removed it in 3.0: they talk to"
            " the brokers): use --bootstrap-server HOST:PORT"
        )


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", nargs="?", action=_ZooKeeperRefused, help=argparse.SUPPRESS)
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the broker(s) to connect to (required)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="a properties file of client configs: security.protocol, sasl.mechanism with"
        " sasl.username and sasl.password or sasl.jaas.config, ssl.* (librdkafka's names or"
        " Kafka's, e.g. ssl.ca.location or ssl.truststore.location) and client.id",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the broker (default {DEFAULT_TIMEOUT_S:g})",
    )


def run_tool(name: str, action: Callable[[], int]) -> int:
    """Run a tool's action, turning a ToolError into one line on stderr."""
    try:
        return action()
    except ToolError as exc:
        sys.stdout.flush()
        print(f"brook {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        return 130


def stdout_closed() -> int:
    """The reader of our output went away (`brook ... | head`): stop quietly, as Unix
    tools do. stdout is pointed at /dev/null so the flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def split_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in bootstrap.split(","):
        item = item.strip()
        # Accept what librdkafka accepts: host:port, optionally with a PLAINTEXT:// prefix.
        item = re.sub(r"^[A-Za-z_]+://", "", item)
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ToolError(f"--bootstrap-server {item!r} is not HOST:PORT", exit_code=2)
        servers.append((host.strip("[]"), int(port)))
    return servers


def check_reachable(bootstrap: str, timeout: float, plaintext: bool = False) -> None:
    """Fail fast, with the reason, when no bootstrap server accepts a TCP connection,
    or (`plaintext`: the tool has no security settings) when the first that does needs
    SASL or TLS (plaintext_probe).

    A client would otherwise retry quietly until the timeout and report only a transport
    failure; an operator wants to know at once that nothing listens there.
    """
    reasons = []
    for host, port in split_bootstrap(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=min(timeout, 5.0)):
                pass
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
            continue
        if plaintext:
            from .plaintext_probe import check_plaintext

            check_plaintext(host, port, min(timeout, 5.0))
        return
    raise ToolError(f"cannot connect to the broker ({'; '.join(reasons)})")


def connect(args: argparse.Namespace, client_id: str) -> KafkaCluster:
    """The cluster of --bootstrap-server, reached over TLS and SASL as --command-config
    says; its settings are checked, and a bootstrap server reached, before anything is
    asked (client.id in --command-config replaces the tool's own)."""
    from .wire_client import KafkaCluster

    properties, security = client_settings(args)
    check_reachable(args.bootstrap_server, args.timeout, plaintext=security is None)
    client_id = properties.get("client.id") or client_id
    return KafkaCluster(args.bootstrap_server, args.timeout, client_id, security)


def client_settings(
    args: argparse.Namespace,
) -> tuple[dict[str, str], ClientSecurity | None]:
    """The properties of --command-config (none when it is not given) and the TLS and
    SASL they ask for (None: PLAINTEXT). The one reading of a tool's security settings:
    librdkafka's property names and Kafka's Java client's alike."""
    properties = command_config(args)
    if not properties:
        return properties, None
    from brook.broker.config.broker_config import ConfigError
    from brook.broker.security.client_security import client_security_from_properties

    try:
        source = f"--command-config {args.command_config}"
        return properties, client_security_from_properties(properties, source)
    except ConfigError as exc:
        raise ToolError(str(exc), 2) from None


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The client properties of --command-config, every name one a client knows."""
    if args.command_config is None:
        return {}
    try:
        properties = parse_java_properties(args.command_config.read_text("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot read --command-config {args.command_config}: {exc}") from None
    from .client_properties import unknown_properties

    unknown = unknown_properties(properties)
    if unknown:
        raise ToolError(
            f'invalid client configuration: No such configuration property: "{unknown[0]}"'
            f" (--command-config {args.command_config})"
        )
    return properties


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """`k=v` items (each may hold several, comma-separated, with `[a,b]` for list values)."""
    configs: dict[str, str] = {}
    for item in items:
        for pair in split_config_list(item):
            name, sep, value = pair.partition("=")
            if not sep or not name.strip():
                raise ToolError(f"{option} {pair!r} is not KEY=VALUE", exit_code=2)
            value = value.strip()
            # kafka-configs.sh writes list values in brackets so that their commas
            # are not taken as separators: cleanup.policy=[compact,delete].
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            configs[name.strip()] = value
    return configs


def split_config_list(text: str) -> list[str]:
    """Split on commas outside square brackets: `a=1,b=[x,y]` -> ['a=1', 'b=[x,y]']."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]
