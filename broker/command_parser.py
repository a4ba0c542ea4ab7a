"""The parser of each `brook` subcommand, with the habits of Kafka's tools.

- `brook topics --version` prints the version, as `kafka-topics.sh --version` does.
- An option the subcommand does not know is that subcommand's usage error, with the
  nearest option it does know: argparse would hand it up to the top-level parser, which
  prints `brook`'s usage instead of the one the user needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn


class VersionAction(argparse.Action):
    """argparse's "version" action, looking the version up only when asked: reading the
    installed distribution's metadata costs `brook serve` about 10 ms of start-up."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version())
        parser.exit()


def version() -> str:
    """The installed distribution's version, as Kafka's tools print theirs."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("brook-broker")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class CommandParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.add_help:
            self.add_argument("--version", action=VersionAction, help="print the version and exit")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.unrecognized(extras)
        return parsed, extras

    def unrecognized(self, extras: list[str]) -> NoReturn:
        from difflib import get_close_matches

        message = f"unrecognized arguments: {' '.join(extras)}"
        options = [
            option
            for action in self._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
        ]
        for extra in extras:
            if extra.startswith("--"):
                near = get_close_matches(extra.split("=", 1)[0], options, n=1)
                if near:
                    message += f" (did you mean {near[0]}?)"
                    break
        self.error(message)
