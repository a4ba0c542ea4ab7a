"""The command lines of bench's modules: one help layout for all of them."""

from __future__ import annotations

import argparse


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
