"""The cleaner's offset map: key -> offset of the key's latest record, within a memory
budget (Kafka's OffsetMap, whose SkimpyOffsetMap holds `log.cleaner.dedupe.buffer.size`
bytes split between the cleaner threads).

Kafka keeps a 16-byte MD5 hash and an 8-byte offset per key in one preallocated buffer,
and stops mapping once `slots * log.cleaner.io.buffer.load.factor` keys are in it. Here
the keys themselves are kept (no hash collision can drop a live record), so each key
is charged what CPython spends on it: its bytes plus ENTRY_OVERHEAD (the bytes object,
the int of its offset, the dict's entry and index; measured with tracemalloc, the
dict's resizes included). The map is full when a new key would take it past
`memory * load_factor`; a key already mapped may always move to a later offset.
"""

from __future__ import annotations

# Bytes a mapped key costs beyond its own length (CPython 3.11-3.13, 64-bit: about 107
# settled, 134 at the peak of a dict resize).
ENTRY_OVERHEAD = 120
# Kafka's default log.cleaner.io.buffer.load.factor.
DEFAULT_LOAD_FACTOR = 0.9
# As Kafka: one thread's buffer is at most 2 GiB.
MAX_MEMORY = 2**31 - 1


class OffsetMap:
    __slots__ = ("capacity", "entries", "latest_offset", "memory", "used")

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        self.memory = max(0, min(memory, MAX_MEMORY))
        self.capacity = int(self.memory * load_factor)
        self.used = 0
        self.entries: dict[bytes, int] = {}
        # The last offset of the last batch mapped whole (Kafka's latestOffset): the
        # cleaning ends after it.
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        """Map `key` to `offset`; False (and nothing changed) when the map is full."""
        entries = self.entries
        if key not in entries:
            cost = len(key) + ENTRY_OVERHEAD
            if self.used + cost > self.capacity:
                return False
            self.used += cost
        entries[key] = offset
        return True

    def get(self, key: bytes) -> int:
        """The offset of `key`'s latest record, or -1 when it is not mapped."""
        return self.entries.get(key, -1)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def utilization(self) -> float:
        """Share of the memory in use (Kafka's buffer utilization)."""
        return self.used / self.memory if self.memory else 1.0
