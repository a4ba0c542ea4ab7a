"""Every option of Brook's command line and of the bench's modules says what it does in
--help: an option added without a help text fails here."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from brook.broker import cli

ROOT = Path(__file__).resolve().parent.parent
BENCH_MODULES = sorted(
    path.stem
    for path in (ROOT / "bench").glob("*.py")
    if "bench_parser(" in path.read_text() and path.stem not in ("cli", "__main__")
)
# An option's line in argparse's help: two spaces, then the option ("-h, --help", "--out OUT").
OPTION_LINE = re.compile(r"^  (-[-\w]+)(?:[ ,]|$)")


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's, however deep."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same one
                found.extend(_parsers(sub))
    return found


def _unexplained(parser: argparse.ArgumentParser) -> list[str]:
    return [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        and action.help != argparse.SUPPRESS
        and not (action.help or "").strip()
    ]


def test_every_brook_option_has_help():
    parsers = _parsers(cli.build_parser())
    progs = {parser.prog for parser in parsers}
    assert {"brook serve", "brook topics", "brook reassign", "brook faults"} <= progs, progs
    missing = {parser.prog: _unexplained(parser) for parser in parsers}
    assert {prog: names for prog, names in missing.items() if names} == {}


def _options_without_help(help_text: str) -> list[str]:
    """The options whose entry in help_text has no text: neither on the option's line
    (after two spaces) nor on the indented line under it."""
    lines = help_text.splitlines()
    missing = []
    for number, line in enumerate(lines):
        option = OPTION_LINE.match(line)
        if option is None:
            continue
        if re.search(r"\S {2,}\S", line.strip()):
            continue
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if following.startswith(" " * 8) and not OPTION_LINE.match(following):
            continue
        missing.append(option.group(1))
    return missing


def test_the_help_reader_finds_an_option_without_help():
    parser = argparse.ArgumentParser(prog="probe")
    parser.add_argument("--explained", help="says what it does")
    parser.add_argument("--long-enough-to-wrap-its-help", metavar="VALUE", help="on the next line")
    parser.add_argument("--silent")
    assert _options_without_help(parser.format_help()) == ["--silent"]


@pytest.mark.parametrize("module", ["__main__", *BENCH_MODULES])
def test_every_bench_option_has_help(module: str):
    name = "bench" if module == "__main__" else f"bench.{module}"
    ran = subprocess.run(
        [sys.executable, "-m", name, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(f"usage: python -m {name} ")
    assert "--help" in ran.stdout and _options_without_help(ran.stdout) == []
