"""`brook audit`: the Spark audit of a log dir (brook.spark.audit), from the brook command.

    brook audit LOG_DIR --out REPORT_DIR [--master URL] [--topics T1,T2]

The audit's arguments are the Spark job's own (brook.spark.audit.options): the command
hands them over unparsed, so that `brook` itself imports no PySpark, and the same
command line works under spark-submit. PySpark comes with `pip install
'brook-broker[spark]'`; without it the command says so.
"""

from __future__ import annotations

import sys
from typing import Any

COMMAND = "audit"
HELP = "audit a log dir with Spark: integrity, semantics, statistics, an HTML report"


def add_parser(commands: Any) -> None:
    # Listed in `brook --help`; brook.broker.cli hands `brook audit ...` to main() below
    # before parsing, so this parser never reads the arguments.
    commands.add_parser(COMMAND, help=HELP, add_help=False)


def main(argv: list[str]) -> int:
    try:
        from brook.spark.audit.job import main as audit
    except ImportError as exc:
        print(
            f"brook audit: error: PySpark and pyarrow are needed ({exc});"
            " install them with: pip install 'brook-broker[spark]'",
            file=sys.stderr,
        )
        return 2
    return audit(argv, prog="brook audit")
