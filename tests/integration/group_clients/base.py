"""The interface every client's adapter offers the consumer-group scenarios.

A GroupMember is one consumer in a group, running on its own as an application runs it
(a thread, an event loop, a process): the test reads what it owns and what it received,
and asks it to commit, leave or report its positions. A GroupClient makes members of
one client and says which features that client lacks, so that a scenario needing one is
skipped with the reason rather than left out.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

TP = tuple[str, int]

# Features a scenario may need and some client lacks (GroupClient.lacks says why).
MANUAL_COMMIT = "manual commit"
COMMITTED = "fetching committed offsets"
ADMIN = "admin client"
DELETE_GROUPS = "DeleteGroups"
STATES_FILTER = "ListGroups states filter"
COOPERATIVE = "cooperative rebalancing"
RIDES_OUT_RESTART = "staying in the group while the broker restarts"


@dataclass(frozen=True)
class Received:
    topic: str
    partition: int
    offset: int
    value: bytes


@dataclass(frozen=True)
class JoinOptions:
    """How a member joins: every client maps these onto its own settings."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None  # a regex subscription instead of topics
    commit_each: bool = False  # commit each record once processed
    instance_id: str | None = None  # static membership (KIP-345)
    session_ms: int | None = None  # None: the client's SESSION_MS
    cooperative: bool = False  # the cooperative-sticky assignor (KIP-429)
    metadata_refresh_ms: int | None = None
    max_poll_records: int | None = None


@dataclass
class Described:
    """DescribeGroups as a client's admin reports it."""

    state: str
    protocol_type: str
    protocol: str
    members: dict[str, set[TP]] = field(default_factory=dict)  # client id -> assignment
    member_ids: set[str] = field(default_factory=set)


class GroupMember(ABC):
    """One consumer of a group, polled in the background."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.received: list[Received] = []
        # ("assign" | "revoke", partitions) as the client's rebalance callbacks report them
        self.events: list[tuple[str, set[TP]]] = []

    @property
    @abstractmethod
    def assignment(self) -> set[TP]: ...

    @abstractmethod
    def check(self) -> None:
        """Raise what went wrong in the member's background work, if anything."""

    @abstractmethod
    def positions(self) -> dict[TP, int]:
        """The offset of the next record the member would hand over, per owned partition
        it knows one for."""

    @abstractmethod
    def commit(self, offsets: Mapping[TP, tuple[int, str]]) -> None:
        """Commit (offset, metadata) per partition, synchronously."""

    @abstractmethod
    def committed(self, partitions: list[TP]) -> dict[TP, int]:
        """The committed offsets as the member itself fetches them."""

    @abstractmethod
    def leave(self) -> None:
        """Close as an application does: a dynamic member sends LeaveGroup."""

    def member_id(self) -> str | None:
        """The member id the coordinator gave, where the client tells it."""
        return None

    def caught_up(self, ends: Mapping[TP, int]) -> bool:
        """Whether every owned partition of `ends` is read to its end: nothing more can
        come unless more is produced."""
        owned = [tp for tp in self.assignment if tp in ends]
        positions = self.positions()
        return all(positions.get(tp) == ends[tp] for tp in owned)


class Killable(Protocol):
    """A member in a process of its own, to SIGKILL: no LeaveGroup reaches the broker."""

    @property
    def assignment(self) -> set[TP]: ...

    def kill(self) -> None: ...


class GroupAdmin(ABC):
    """A client's admin API for groups."""

    @abstractmethod
    def list_groups(self, states: set[str] | None = None) -> list[str]: ...

    @abstractmethod
    def describe(self, group: str) -> Described: ...

    @abstractmethod
    def committed(self, group: str) -> dict[TP, tuple[int, str]]: ...

    @abstractmethod
    def end_offsets(self, partitions: list[TP]) -> dict[TP, int]: ...

    def delete(self, group: str) -> ErrorCode:
        raise NotImplementedError


class GroupClient(ABC):
    """Makes one client's members for a test and closes what is left at its end."""

    name: str
    # The assignor the coordinator picks for the client's default settings.
    default_protocol: str
    # The assignor the coordinator picks for a member joining with cooperative=True.
    cooperative_protocol: str = "cooperative-sticky"
    # Session timeout of its members unless told: short, so a vanished one is noticed fast.
    session_ms: int
    # Feature -> why this client cannot serve a scenario that needs it.
    lacks: dict[str, str] = {}

    def __init__(self) -> None:
        self.members: list[GroupMember] = []

    def join(self, bootstrap: str, group: str, client_id: str, **options: Any) -> GroupMember:
        member = self._join(bootstrap, group, client_id, JoinOptions(**options))
        self.members.append(member)
        return member

    @abstractmethod
    def _join(
        self, bootstrap: str, group: str, client_id: str, options: JoinOptions
    ) -> GroupMember: ...

    def leave(self, member: GroupMember) -> None:
        self.members.remove(member)
        member.leave()

    def check(self) -> None:
        for member in self.members:
            member.check()

    @abstractmethod
    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> Killable: ...

    @contextmanager
    def admin(self, bootstrap: str) -> Iterator[GroupAdmin]:
        raise NotImplementedError
        yield

    def close_all(self) -> None:
        """Close every member still open, all at once where the client allows."""
        members, self.members = self.members, []
        for member in members:
            member.leave()

    def close(self) -> None:
        """At the end of the test: close the members and whatever runs them."""
        self.close_all()


class ThreadMember(GroupMember):
    """A member whose consumer is polled by a thread of its own; the test's calls into
    the consumer run on that thread between polls (consumers are not thread-safe)."""

    def __init__(self, client_id: str) -> None:
        super().__init__(client_id)
        self._assignment: set[TP] = set()
        # Next offset per owned partition, as the polling thread last saw it.
        self._positions: dict[TP, int] = {}
        self.error: BaseException | None = None
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{client_id}", daemon=True)

    @abstractmethod
    def _poll(self) -> None:
        """Poll once: append what arrived to `received` (committing it if asked), let
        rebalance callbacks run, and then update `_positions`."""

    @abstractmethod
    def _owned(self) -> set[TP]: ...

    @abstractmethod
    def _close(self) -> None: ...

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                while not self._calls.empty():
                    function, done = self._calls.get()
                    try:
                        done.set_result(function())
                    except Exception as exc:
                        done.set_exception(exc)
                self._poll()
                self._assignment = self._owned()
        except BaseException as exc:  # surfaced to the test by check()
            self.error = exc
        finally:
            self._close()

    def call(self, function: Callable[[], Any]) -> Any:
        """Run `function` on the member's thread and return its result."""
        done: Future[Any] = Future()
        self._calls.put((function, done))
        return done.result(30)

    @property
    def assignment(self) -> set[TP]:
        return self._assignment

    def positions(self) -> dict[TP, int]:
        return dict(self._positions)

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self._thread.name} failed") from self.error

    def stop(self) -> None:
        """Ask the thread to close the consumer after its current poll."""
        self._stop.set()

    def leave(self) -> None:
        self.stop()
        self._thread.join(30)
        self.check()


class ThreadClient(GroupClient):
    """A client whose members are ThreadMembers: all are asked to stop at once, since
    each waits out its current poll."""

    def close_all(self) -> None:
        members, self.members = self.members, []
        for member in members:
            assert isinstance(member, ThreadMember)
            member.stop()
        for member in members:
            member.leave()
