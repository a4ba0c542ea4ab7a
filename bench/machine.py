"""A description of the machine and client library, so a result says where it was measured."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import confluent_kafka
import psutil  # type: ignore[import-untyped]  # psutil ships no types (types-psutil is no dependency)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine() -> dict[str, object]:
    # version() returns a bare string in recent confluent-kafka and a (str, int) pair in old ones.
    version = confluent_kafka.version()
    client_version = version[0] if isinstance(version, tuple) else version
    librdkafka_version = confluent_kafka.libversion()[0]
    return {
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "confluent_kafka": client_version,
        "librdkafka": librdkafka_version,
    }


def short_machine(info: dict[str, object]) -> str:
    return f"{info['hostname']}, {info['cpu']}, {info['cores']} cores"


def file_create_us(directory: Path, files: int = 500) -> float:
    """Microseconds to create one empty file in `directory` just now (the mean of `files`),
    left in place: on an ext4 without a journal (this machine's root) creating files right
    after many were deleted costs up to 50 times more for minutes (the allocator steps over
    every recently freed inode), which a round that makes thousands of partitions feels.
    The caller deletes `directory` when it is done, after its last round."""
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for index in range(files):
        os.close(os.open(directory / str(index), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    return (time.perf_counter() - started) / files * 1e6
