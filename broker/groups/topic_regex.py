"""Subscriptions by regular expression, as Kafka takes them (KIP-848's SubscribedTopicRegex).

Kafka compiles them with RE2J, so their syntax is RE2's: no backreferences or lookaround
(what Python's `re` would take, Kafka refuses with INVALID_REGULAR_EXPRESSION). The
google-re2 binding compiles them here, with its error log switched off (a client's bad
regex is the client's error, logged once by the coordinator as such). A regex matches a
topic when it matches the whole name.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


class InvalidTopicRegex(ValueError):
    """The regex does not compile as RE2; the message says why, as RE2 puts it."""


@lru_cache(maxsize=256)
def compile_topic_regex(pattern: str) -> Any:
    """The compiled regex (cached: every heartbeat of a member resolves it again)."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise InvalidTopicRegex(text) from None


def matching(pattern: str, names: list[str]) -> frozenset[str]:
    compiled = compile_topic_regex(pattern)
    return frozenset(name for name in names if compiled.fullmatch(name))
