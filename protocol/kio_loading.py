"""kio's types loaded without their hypothesis strategies, for the `brook` process and
Spark's Python workers.

kio's phantom types (kio.static._phantom) import hypothesis whenever it is installed and
register a strategy for every type as the type is defined: about 130 ms and 13 MiB of a
broker's ~100 ms start, in any environment that happens to hold hypothesis (a project's
test environment, Brook's own). A broker draws no examples. So the command line imports
this module first: kio's types are imported while `hypothesis` reads as absent (a None in
sys.modules makes its import raise ImportError), after which the module table is as it
was, and anything the process imports later may still import hypothesis itself.

Only the command line and a Spark Python worker (brook.spark, when Spark's environment
says it runs in one) do this: a test process that imports the broker's modules keeps
kio's strategies (tests may build kio types with hypothesis). A Spark task starts a
worker often (each planning step, each reused worker's first task), and decodes segments
with kio's types: 0.3 CPU-s of hypothesis at every start.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

# kio's only hypothesis import: `import hypothesis.strategies` at the top of this module,
# whose module-level `hypothesis` every phantom type checks as it is defined.
KIO_PHANTOM = "kio.static._phantom"
HIDDEN = ("hypothesis", "hypothesis.strategies")


def import_kio_without_hypothesis() -> None:
    if KIO_PHANTOM in sys.modules:
        return  # kio is in already, with whatever it found: nothing left to steer
    saved: dict[str, ModuleType | None] = {name: sys.modules.get(name) for name in HIDDEN}
    for name in HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        importlib.import_module(KIO_PHANTOM)
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module


import_kio_without_hypothesis()
