"""Where storage reports an I/O error on a log dir (Kafka's LogDirFailureChannel).

Kafka takes a log dir offline at its first I/O error: whatever failed may have left
the dir's files half-written, and carrying on would hand out offsets that the files do
not hold. The partitions of an offline dir answer KAFKA_STORAGE_ERROR; a broker left
with no online dir shuts down, and the next start recovers the dir from its last
clean state (an offline dir never gets the clean-shutdown marker).

Errors of the process rather than of the disk (too many open files, out of memory)
fail the request that met them but leave the dir online, since nothing on disk is
suspect; `is_disk_error` tells them apart.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("brook.storage.log_dir_failure")

# Failures of this process, not of the log dir's files.
PROCESS_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def is_disk_error(exc: OSError) -> bool:
    """Whether an OSError says the dir's files may be damaged (ENOSPC, EIO, EROFS...)."""
    return exc.errno not in PROCESS_ERRNOS


class LogDirFailureChannel:
    """The set of offline log dirs, and who to tell when one goes offline."""

    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._listeners: list[Callable[[Path], None]] = []

    def add_listener(self, listener: Callable[[Path], None]) -> None:
        """`listener(log_dir)` runs once per dir, right when the dir goes offline."""
        self._listeners.append(listener)

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Each offline dir with the message that took it offline."""
        return dict(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, exc: OSError) -> None:
        """Take `log_dir` offline (once) and tell the listeners."""
        if log_dir in self._offline:
            return
        self._offline[log_dir] = f"{message}: {exc}"
        logger.error("%s; taking log dir %s offline: %s", message, log_dir, exc)
        for listener in list(self._listeners):
            listener(log_dir)
