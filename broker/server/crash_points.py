"""Crash points for tests: places where the broker kills itself (SIGKILL, as a power cut
would stop it) when a test names the place in the BROOK_CRASH_POINT environment variable.

Crash tests need the broker to die at an exact point of a multi-step write (a
transaction prepared but not all of its markers written), which no timing can hit
reliably. Unset, as for every user, a crash point costs one comparison.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("brook.crash_points")

ENVIRONMENT_VARIABLE = "BROOK_CRASH_POINT"
_ARMED = os.environ.get(ENVIRONMENT_VARIABLE)

# Named places.
TRANSACTION_MARKER_WRITTEN = "transaction-marker-written"
# The log cleaner's swap (storage Log.replace_segments): after `.cleaned` -> `.swap`,
# and after the old segments were renamed `.deleted`.
LOG_CLEANER_SWAP_RENAMED = "log-cleaner-swap-renamed"
LOG_CLEANER_OLD_DELETED = "log-cleaner-old-deleted"


def crash_point(name: str) -> None:
    if name == _ARMED:
        log.error(
            "Crash point %s reached: killing the broker (%s is set)", name, ENVIRONMENT_VARIABLE
        )
        os.kill(os.getpid(), signal.SIGKILL)
