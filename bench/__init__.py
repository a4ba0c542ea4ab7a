"""Brook's benchmark: Brook against a reference broker, same machine, same run.

Run it from the repository root with ``python -m bench`` (see bench/README.md). Every number it
prints is paired with the reference broker's number measured moments before or after on the same
machine, so the ratios, not the absolute figures, are what to compare between machines and commits.
"""
