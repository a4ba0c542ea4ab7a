"""CRC32C (Castagnoli), the checksum of record batches and producer-state snapshots.

The computing is the `crc32c` package's (hardware-accelerated where the CPU has it). Its
package `__init__` looks its own version up through importlib.metadata, which costs a
broker's start about 40 ms and 5 MiB for a string nobody reads; so the compiled module
is loaded by itself, and the package imported as usual only where that fails (another
layout of a later release).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

Data = bytes | bytearray | memoryview


def _load_extension() -> ModuleType:
    name = "crc32c._crc32c"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("crc32c")  # finds the package without running it
    if spec is not None and spec.submodule_search_locations:
        for directory in spec.submodule_search_locations:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = Path(directory) / f"_crc32c{suffix}"
                if path.is_file():
                    extension = importlib.util.spec_from_file_location(name, path)
                    if extension is not None and extension.loader is not None:
                        module = importlib.util.module_from_spec(extension)
                        extension.loader.exec_module(module)
                        return module
    import crc32c as package

    return package


_crc32c: Callable[[Data], int] = _load_extension().crc32c


def crc32c(data: Data) -> int:
    """The CRC32C of `data` (bytes, bytearray or a memoryview of either)."""
    return _crc32c(data)
