"""`brook compact LOG_DIR --out OUT_DIR`: compact a stopped broker's log dir with Spark.

Every partition of LOG_DIR becomes one Spark task (brook.spark.compact): compacted
topics are cleaned by the broker's own log cleaner, the others copied, and OUT_DIR is
left as a broker's clean shutdown leaves a log dir. The topics' configs are those the
broker would use: their overrides from LOG_DIR's brook-topic-configs.json (or
--topic-configs), over the broker's settings from --config/--override and the dynamic
ones kept in LOG_DIR's brook-broker-configs.json.

Also a spark-submit script, for a Spark cluster whose workers share the file system:

    spark-submit --master spark://HOST:7077 \\
        "$(python -c 'import brook.broker.tools.compact as m; print(m.__file__)')" \\
        /data/brook --out /data/brook-compacted
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Absolute imports: spark-submit runs this file as a script.
from brook.broker.config.broker_config import (
    BrokerConfig,
    ConfigError,
    read_properties,
    warn_unknown_keys,
)
from brook.broker.config.dynamic import DynamicBrokerConfig
from brook.broker.config.topic_config import log_config_for, validate_topic_configs
from brook.broker.metadata.store import TOPIC_CONFIGS_FILE
from brook.broker.tools.common import ToolError, run_tool
from brook.storage.checkpoints import read_meta_properties
from brook.storage.log_config import LogConfig

DESCRIPTION = """\
Compact the partitions of a stopped broker's log dir (or a copy of it) into OUT_DIR,
with Spark: the latest record of every key of compacted topics is kept at its
original offset, with the broker's own log cleaner; other topics are copied. A broker
started on OUT_DIR serves the result. LOG_DIR is never written to; a log dir that a
running broker holds is refused, and so is an OUT_DIR that is not empty."""

EPILOG = """\
examples:
  brook compact /var/lib/brook --out /var/lib/brook-compacted
  brook compact /var/lib/brook --out /tmp/out --topics orders,payments --master local[4]
  spark-submit --master spark://host:7077 "$(python -c 'import brook.broker.tools.compact \\
      as m; print(m.__file__)')" /shared/brook --out /shared/brook-compacted
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "compact",
        help="compact a stopped broker's log dir into another, with Spark",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log_dir", type=Path, metavar="LOG_DIR", help="the log dir to compact")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="OUT_DIR", help="a new or empty directory"
    )
    parser.add_argument(
        "--topics",
        action="append",
        default=[],
        metavar="T1,T2",
        help="compact only these topics (comma-separated, repeatable); the others are copied",
    )
    parser.add_argument(
        "--master",
        metavar="URL",
        help="Spark master: local[*] (the default), local[N], spark://HOST:PORT ...;"
        " under spark-submit, its --master",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the broker's server.properties: its defaults for the topics' configs",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one broker config key, as for `brook serve` (repeatable)",
    )
    parser.add_argument(
        "--topic-configs",
        type=Path,
        metavar="FILE",
        help=f"the topics' configs as JSON {{topic: {{key: value}}}} (default: LOG_DIR's"
        f" {TOPIC_CONFIGS_FILE}; give it for a log dir Apache Kafka wrote, whose topic"
        " configs live in its metadata)",
    )


def run(args: argparse.Namespace) -> int:
    return run_tool("compact", lambda: compact(args))


_IMPORTED = time.monotonic()


def process_started() -> float:
    """When this process started, on time.monotonic()'s clock, so that the time the
    command reports is its wall time: the interpreter's start, PySpark's import and the
    JVM's start (tens of seconds on a busy machine) included. From /proc/self/stat's
    start time (clock ticks since boot, as CLOCK_BOOTTIME counts); where there is no
    /proc, when this module was imported."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            # The command name (field 2) may hold spaces: fields are counted after it.
            fields = stat.read().rsplit(b")", 1)[1].split()
        start_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_s
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return time.monotonic() - max(0.0, age)


def compact(args: argparse.Namespace) -> int:
    started = process_started()
    try:
        from brook.spark.compact import (
            CompactionError,
            NotALogDirError,
            compact_log_dir,
            done_line,
            locked_dirs,
            plan_tasks,
        )
    except ImportError as exc:
        raise ToolError(
            f"Spark is not installed ({exc}): pip install 'brook-broker[spark]'"
        ) from None
    log_dir: Path = args.log_dir.absolute()
    out_dir: Path = args.out.absolute()
    topics = {t.strip() for item in args.topics for t in item.split(",") if t.strip()} or None
    try:
        # Checked before Spark starts (seconds): refusals are immediate.
        existed = out_dir.exists()
        with locked_dirs(log_dir, out_dir):
            broker = broker_config(log_dir, args.config, args.override)
            log_config = topic_log_configs(log_dir, broker, args.topic_configs)
            plan_tasks(log_dir, out_dir, log_config, topics=topics)
        if not existed:  # made for its lock only; the job makes it again
            shutil.rmtree(out_dir)
        spark = spark_session(args.master)
        try:
            summary = compact_log_dir(
                spark,
                log_dir,
                out_dir,
                log_config,
                topics=topics,
                offset_map_memory=broker["log.cleaner.dedupe.buffer.size"],
                started=started,
                say_done=False,
            )
        finally:
            spark.stop()
        # After Spark has stopped: the command's whole wall time.
        print(done_line(summary, out_dir, time.monotonic() - started), file=sys.stderr)
    except NotALogDirError as exc:
        raise ToolError(str(exc), exit_code=2) from None
    except CompactionError as exc:
        raise ToolError(str(exc)) from None
    except ConfigError as exc:
        raise ToolError(f"invalid configuration: {exc}", exit_code=2) from None
    except OSError as exc:
        raise ToolError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
    return 0


def broker_config(log_dir: Path, config: Path | None, overrides: list[str]) -> BrokerConfig:
    """The broker's config in force for LOG_DIR: the file and overrides given, with the
    dynamic configs the broker stored in LOG_DIR over them."""
    properties = read_properties(config) if config else {}
    meta = read_meta_properties(log_dir)
    where = [f"log.dirs={log_dir}"]
    if meta is not None and meta.broker_id is not None:
        where.append(f"broker.id={meta.broker_id}")
    static = BrokerConfig.build(properties, {}, [*overrides, *where])
    # As `brook serve`: keys that name no config are passed over, said once.
    warn_unknown_keys(
        static,
        str(config) if config else None,
        lambda line: print(f"Warning: {line}", file=sys.stderr),
    )
    return DynamicBrokerConfig(static).load()


def topic_log_configs(
    log_dir: Path, broker: BrokerConfig, configs_file: Path | None
) -> Callable[[str], LogConfig]:
    """Each topic's log config, from its stored overrides as the broker opens its logs."""
    path = configs_file or log_dir / TOPIC_CONFIGS_FILE
    try:
        stored: dict[str, dict[str, Any]] = json.loads(path.read_text())
    except FileNotFoundError:
        if configs_file is not None:
            raise
        stored = {}
    except json.JSONDecodeError as exc:
        raise ToolError(f"{path} is not JSON: {exc}") from None
    if not isinstance(stored, dict) or not all(isinstance(v, dict) for v in stored.values()):
        raise ToolError(f"{path} must map each topic to its configs")
    overrides = {}
    for topic, configs in stored.items():
        strings = {key: _as_string(value) for key, value in configs.items()}
        try:
            overrides[topic] = validate_topic_configs(strings)
        except ConfigError as exc:
            raise ToolError(f"topic {topic} in {path}: {exc}") from None
    return lambda topic: log_config_for(broker, overrides.get(topic, {}))


def _as_string(value: Any) -> str:
    """A stored config value as the string a user would give (lists comma-separated)."""
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def spark_session(master: str | None) -> Any:
    # Spark's Python workers must import brook.spark: this interpreter has it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("brook compact").config(
        "spark.ui.showConsoleProgress", "false"
    )
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which sets the master itself): this machine's cores.
        builder = builder.master("local[*]")
    return builder.getOrCreate()


def main(argv: list[str] | None = None) -> int:
    """The spark-submit entry: the same arguments as `brook compact`."""
    parser = argparse.ArgumentParser(
        prog="brook compact",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
