"""The command lines of bench's modules: one help layout for all of them."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.brokers import BROKER_NAMES


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Prints a module's doc as written (its paragraphs and example lines) and each
    option's default after its help, unless there is none to say (None, a flag's False,
    an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


def bench_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of `python -m <prog>`, its help the module's doc."""
    return argparse.ArgumentParser(prog=prog, description=doc, formatter_class=HelpFormatter)


def add_broker_selection(parser: argparse.ArgumentParser, results_dir: Path) -> None:
    """--only and --out of the benches that run Brook, Tansu and Kafka in turn."""
    parser.add_argument(
        "--only",
        choices=BROKER_NAMES,
        action="append",
        help="measure this broker (repeatable; none: all three)",
    )
    parser.add_argument(
        "--out", type=Path, default=results_dir, help="directory for the JSON, charts and logs"
    )
