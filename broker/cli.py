"""The `brook` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from brook.storage.errors import StorageError

from .config import BROKER_CONFIGS, BrokerConfig, ConfigError, read_properties

log = logging.getLogger("brook.cli")

SERVE_EPILOG = """\
configuration, lowest precedence first:
  Kafka's defaults < --config FILE < BROOK_* environment variables < --override
  environment: BROOK_<KEY>, the key upper-cased with dots as underscores,
  e.g. BROOK_LOG_DIRS=/data BROOK_LISTENERS=PLAINTEXT://0.0.0.0:9092

example:
  brook serve --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=/tmp/b
"""


# Commands that need none of the operator's tools: `brook serve` starts without importing
# them (their modules and the wire client cost tens of milliseconds of start-up).
TOOL_FREE_COMMANDS = frozenset({"serve", "configs-list"})


def build_parser(with_tools: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brook", description="Brook: a Kafka-compatible broker written in Python."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run a broker",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--config", type=Path, metavar="FILE", help="a Kafka server.properties file")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key (repeatable)",
    )
    serve.add_argument(
        "--log-level",
        default=os.environ.get("BROOK_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="how much the broker logs (default INFO, or $BROOK_LOG_LEVEL)",
    )
    commands.add_parser("configs-list", help="list every broker config key with its default")
    if with_tools:
        # The operator's tools: each module adds its subcommand and the function that runs it.
        from .tools import audit, configs, dump_log, groups, storage_zip, topics, transactions

        for tool in (topics, configs, groups, transactions, dump_log, storage_zip, audit):
            tool.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "audit":
        # The Spark job parses its own arguments (brook.spark.audit.options).
        from .tools import audit

        sys.exit(audit.main(argv[1:]))
    with_tools = not argv or argv[0] not in TOOL_FREE_COMMANDS
    args = build_parser(with_tools).parse_args(argv)
    if hasattr(args, "run"):
        sys.exit(args.run(args))
    if args.command == "configs-list":
        for name, key in sorted(BROKER_CONFIGS.items()):
            print(f"{name}={'' if key.default is None else key.default}  # {key.doc}")
        return
    sys.exit(serve(args))


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        properties = read_properties(args.config) if args.config else {}
        config = BrokerConfig.build(properties, os.environ, args.override)
    except (ConfigError, OSError) as exc:
        log.error("Invalid configuration: %s", exc)
        return 2
    try:
        import uvloop

        return uvloop.run(_run(config))
    except (OSError, StorageError) as exc:
        # A port in use, a data dir locked by another broker, a broker.id that does not
        # match meta.properties: one line naming the cause, no traceback.
        log.error("Cannot start the broker: %s", exc)
        return 1


async def _run(config: BrokerConfig) -> int:
    from .broker import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, broker.request_stop)
    await broker.start()
    await broker.stop_requested.wait()
    await broker.stop()
    return broker.exit_code


if __name__ == "__main__":
    main()
