"""The `brook` command line."""

from __future__ import annotations

# Before any module that imports kio: the process loads kio's types without registering
# hypothesis strategies for them, whatever else is installed (kio_loading says why).
from brook.protocol import kio_loading  # noqa: F401

# isort: split

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from brook.protocol.releases import KNOWN_RELEASES
from brook.storage.errors import StorageError

from .command_parser import CommandParser, VersionAction
from .config.broker_config import (
    BROKER_CONFIGS,
    BrokerConfig,
    ConfigError,
    read_properties,
    warn_unknown_keys,
)
from .config.values import config_to_string
from .observability.log_format import configure_logging
from .zookeeper.errors import ZooKeeperStartupError

log = logging.getLogger("brook.cli")

# The GIL's switch interval while the log cleaner computes (replica/log_cleaner.py says
# why): consuming during a cleaning went from 0.47-0.49x of its rate to 0.75-0.81x with
# 0.5 ms, the cleaning as fast (bench.log_cleaner).
CLEANER_SWITCH_INTERVAL_S = 0.0005

SERVE_EPILOG = """\
configuration, lowest precedence first:
  Kafka's defaults < the properties file < BROOK_* environment variables < --override
  the file: a Kafka server.properties (KRaft or ZooKeeper flavour); keys Brook does not
  know are named in one warning and passed over
  environment: BROOK_<KEY>, the key upper-cased with dots as underscores,
  e.g. BROOK_LOG_DIRS=/data BROOK_LISTENERS=PLAINTEXT://0.0.0.0:9092

examples:
  brook serve --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=/tmp/b
  brook serve config/server.properties --override log.dirs=/tmp/b
"""


# Commands that need none of the operator's tools: `brook serve` starts without importing
# them (their modules and the wire client cost tens of milliseconds of start-up).
TOOL_FREE_COMMANDS = frozenset({"serve", "configs-list", "--version"})
# Each tool's subcommand (and its aliases) and its module in broker/tools/, in the order
# help lists them.
TOOL_MODULES = {
    "topics": "topics",
    "configs": "configs",
    "groups": "groups",
    "consumer-groups": "groups",
    "share-groups": "share_groups",
    "transactions": "transactions",
    "dump-log": "dump_log",
    "storage-zip": "storage_zip",
    "audit": "audit",
    "compact": "compact",
    "acls": "acls",
    "leader-election": "leader_election",
    "reassign": "reassign",
    "reassign-partitions": "reassign",
    "faults": "faults",
    "cluster": "cluster",
}


def _terminal_width() -> int:
    """The help's width as argparse sizes it (COLUMNS, else the terminal, minus 2), read
    without the shutil module that argparse imports for it (with its compression modules,
    about 2 ms of `brook serve`'s start)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(columns - 2, 11)


class HelpFormatter(argparse.HelpFormatter):
    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, width or _terminal_width())


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


def build_parser(with_tools: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: `serve` and `configs-list`, and with `with_tools` the
    operator's tools (only the one `only` names, if it names one)."""
    parser = argparse.ArgumentParser(
        prog="brook",
        description="Brook: a Kafka-compatible broker written in Python.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )
    serve = commands.add_parser(
        "serve",
        help="run a broker",
        epilog=SERVE_EPILOG,
        formatter_class=RawDescriptionHelpFormatter,
    )
    # Kafka's kafka-server-start.sh takes the file as its argument; --config is Brook's
    # older spelling of the same.
    serve.add_argument(
        "properties",
        type=Path,
        nargs="?",
        metavar="FILE",
        help="a Kafka server.properties file (as kafka-server-start.sh takes it)",
    )
    serve.add_argument("--config", type=Path, metavar="FILE", help="the same file, as an option")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key (repeatable)",
    )
    serve.add_argument(
        "--emulate",
        metavar="RELEASE",
        help="advertise the API versions of this Apache Kafka release, to test a client's"
        f" fallbacks (brook.emulate.release; one of {', '.join(KNOWN_RELEASES)})",
    )
    serve.add_argument(
        "--log-level",
        default=os.environ.get("BROOK_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="how much the broker logs (default INFO, or $BROOK_LOG_LEVEL)",
    )
    commands.add_parser(
        "configs-list",
        help="list every broker config key with its default",
        formatter_class=HelpFormatter,
    )
    if with_tools:
        # The operator's tools: each module adds its subcommand and the function that runs it.
        # A command line that names a tool imports that one only (all of them cost about
        # 0.2 s of a 0.55 s start); help and mistakes list them all.
        import importlib

        modules = [TOOL_MODULES[only]] if only in TOOL_MODULES else TOOL_MODULES.values()
        for module in dict.fromkeys(modules):  # each once, in order
            tool = importlib.import_module(f"{__package__}.tools.{module}")
            tool.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    # A broker's imports allocate hundreds of thousands of objects that live as long as the
    # process (modules, classes, kio's schemas) and next to no garbage: the cyclic
    # collector's passes over them would cost several ms of a ~100 ms start. `brook serve`
    # turns it back on once they are made (_run); every other command at once.
    gc.disable()
    try:
        _main(argv)
    finally:
        gc.enable()


def _main(argv: list[str] | None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "serve":
        gc.enable()
    if argv and argv[0] == "audit":
        # The Spark job parses its own arguments (brook.spark.audit.options).
        from .tools import audit

        sys.exit(audit.main(argv[1:]))
    with_tools = not argv or argv[0] not in TOOL_FREE_COMMANDS
    parser = build_parser(with_tools, only=argv[0] if argv else None)
    if not argv:
        # Kafka's tools given no arguments print their help on stderr and exit 1
        # (CommandLineUtils.printUsageAndExit).
        parser.print_help(sys.stderr)
        sys.exit(1)
    args = parser.parse_args(argv)
    if hasattr(args, "run"):
        sys.exit(args.run(args))
    if args.command == "configs-list":
        for name, key in sorted(BROKER_CONFIGS.items()):
            print(f"{name}={config_to_string(key.default) or ''}  # {key.doc}")
        return
    if args.properties is not None and args.config is not None:
        parser.error("give the properties file once: as an argument or with --config")
    sys.exit(serve(args))


def serve(args: argparse.Namespace) -> int:
    # Kafka-like text until the config says otherwise (log.format).
    configure_logging(args.log_level)
    path = args.properties or args.config
    try:
        properties = read_properties(path) if path else {}
        overrides = list(args.override)
        if args.emulate is not None:
            # --emulate R is --override brook.emulate.release=R, named as given when refused.
            try:
                BROKER_CONFIGS["brook.emulate.release"].parse(args.emulate)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (from --emulate)") from None
            overrides.append(f"brook.emulate.release={args.emulate}")
        config = BrokerConfig.build(properties, os.environ, overrides)
    except (ConfigError, OSError) as exc:
        log.error("Invalid configuration: %s", exc)
        return 2
    if config["log.format"] != "text":
        configure_logging(args.log_level, config["log.format"])
    warn_unknown_keys(config, str(path) if path else None)
    if config.ignored_env:
        log.warning(
            "Passing over environment variable(s) that name no broker config: %s"
            " (BROOK_<KEY> sets a config: `brook configs-list` lists them)",
            ", ".join(config.ignored_env),
        )
    try:
        import uvloop

        return uvloop.run(_run(config))
    except (OSError, StorageError, ZooKeeperStartupError) as exc:
        # A port in use, a data dir locked by another broker, a broker.id that does not
        # match meta.properties, no ZooKeeper within zookeeper.connection.timeout.ms, a
        # broker.id registered by another live broker: one line naming the cause, no
        # traceback.
        log.error("Cannot start the broker: %s", exc)
        return 1


async def _run(config: BrokerConfig) -> int:
    from .server.broker import Broker

    broker = Broker(config)
    broker.cleaner_switch_interval = CLEANER_SWITCH_INTERVAL_S
    # What the imports made stays for the process's life: frozen out of the collector's
    # view (its full passes need not walk it again), which comes back on before the start
    # proper, whose log recovery may run long.
    gc.freeze()
    gc.enable()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, broker.request_stop)
    await broker.start()
    await broker.stop_requested.wait()
    await broker.stop()
    return broker.exit_code


if __name__ == "__main__":
    main()
