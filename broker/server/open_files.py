"""The open-file limit: raised to its hard limit at start, as the JVM does for Kafka.

Every client holds a socket, and every partition in use its active segment's files (the
log and its two indexes; storage/idle_files.py closes them when idle), so the common
default of 1,024 descriptors is soon short. HotSpot raises the soft RLIMIT_NOFILE to the
hard limit when a JVM starts (-XX:+MaxFDLimit, on by default), so a Kafka broker gets
the hard limit without asking; Brook does the same and says what it got.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("brook.broker")


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one; return the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        log.info("Open-file limit (RLIMIT_NOFILE): %s", _describe(soft))
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. a sandbox that refuses the change
        log.warning(
            "Open-file limit (RLIMIT_NOFILE) stays at %d: cannot raise it to %d: %s",
            soft,
            hard,
            exc,
        )
        return soft
    log.info("Raised the open-file limit (RLIMIT_NOFILE) from %d to its hard limit %d", soft, hard)
    return hard


def _describe(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
