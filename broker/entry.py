"""The `brook` console script: the cyclic garbage collector off before anything is
imported (see cli.main, which turns it back on), then the CLI."""

import gc


def main() -> None:
    gc.disable()
    from .cli import main as cli_main

    cli_main()
