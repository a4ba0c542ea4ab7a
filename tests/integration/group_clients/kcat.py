"""kcat's balanced consumer (`kcat -G group topic`, librdkafka 2.0.2) behind the group
scenarios' interface.

Each kcat is a process: it prints records on stdout, and on stderr its rebalances
("% Group g rebalanced (memberid ...): assigned: t [0], t [1]") and each partition it
has read to the end ("% Reached end of topic t [0] at offset 10"), which is how a test
follows its assignment and position. kcat stores the offset of each record it printed and
commits it; SIGTERM closes it cleanly (final commit, LeaveGroup), SIGKILL leaves only the
session timeout to notice.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping

from .base import (
    ADMIN,
    COMMITTED,
    DELETE_GROUPS,
    MANUAL_COMMIT,
    RIDES_OUT_RESTART,
    STATES_FILTER,
    TP,
    GroupClient,
    GroupMember,
    JoinOptions,
    Received,
)

KCAT = shutil.which("kcat")
# librdkafka 2.0.2 waits about two seconds before rejoining after a failed SyncGroup
# (a member joined meanwhile); sending no heartbeat in between, it needs a session
# timeout longer than that, or the coordinator rightly expires it.
SESSION_MS = 4000
PARTITION = re.compile(r"(\S+) \[(\d+)\]")
END = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")


class Kcat(GroupMember):
    """One `kcat -G` process, its records, its assignment and its positions."""

    def __init__(self, bootstrap: str, group: str, client_id: str, options: JoinOptions) -> None:
        super().__init__(client_id)
        assert KCAT is not None
        config = [
            f"session.timeout.ms={options.session_ms or SESSION_MS}",
            "heartbeat.interval.ms=100",
            "auto.offset.reset=earliest",
            "auto.commit.interval.ms=100",
            "fetch.wait.max.ms=50",
            f"client.id={client_id}",
        ]
        if options.instance_id is not None:
            config.append(f"group.instance.id={options.instance_id}")
        if options.cooperative:
            config.append("partition.assignment.strategy=cooperative-sticky")
        if options.metadata_refresh_ms is not None:
            config.append(f"topic.metadata.refresh.interval.ms={options.metadata_refresh_ms}")
        # -u: unbuffered, so each record reaches the pipe as kcat prints it.
        command = [KCAT, "-b", bootstrap, "-G", group, "-u", "-f", "%t %p %o %s\\n"]
        for setting in config:
            command += ["-X", setting]
        # A regex subscription is a topic starting with ^, as librdkafka takes it.
        topics = [options.pattern] if options.pattern is not None else list(options.topics)
        self.process = subprocess.Popen(
            [*command, *topics], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._assignment: set[TP] = set()
        self._positions: dict[TP, int] = {}
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_records, daemon=True),
            threading.Thread(target=self._read_events, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_records(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            topic, partition, offset, value = line.rstrip("\n").split(" ", 3)
            self.received.append(Received(topic, int(partition), int(offset), value.encode()))
            self._positions[(topic, int(partition))] = int(offset) + 1

    def _read_events(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "rebalanced" in line and "): " in line:
                listed = line.split("): ", 1)[1]  # after "(memberid ...)"
                partitions = {(t, int(p)) for t, p in PARTITION.findall(listed)}
                if "assigned:" in line or "incremental assignment" in line:
                    kind = "assign"
                    if "incremental" in line:
                        self._assignment = self._assignment | partitions
                    else:
                        self._assignment = partitions
                else:
                    kind = "revoke"
                    self._assignment = self._assignment - partitions
                # A partition (re)assigned starts from its committed offset: unknown here
                # until kcat prints from it or reaches its end.
                for tp in partitions:
                    self._positions.pop(tp, None)
                self.events.append((kind, partitions))
            elif end := END.search(line):
                topic, partition, offset = end.groups()
                self._positions[(topic, int(partition))] = int(offset)
            elif "ERROR" in line:
                self.errors.append(line.strip())

    @property
    def assignment(self) -> set[TP]:
        return self._assignment

    def check(self) -> None:
        assert not self.errors, self.errors

    def positions(self) -> dict[TP, int]:
        return {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}

    def commit(self, offsets: Mapping[TP, tuple[int, str]]) -> None:
        raise NotImplementedError(KcatClient.lacks[MANUAL_COMMIT])

    def committed(self, partitions: list[TP]) -> dict[TP, int]:
        raise NotImplementedError(KcatClient.lacks[COMMITTED])

    def leave(self) -> None:
        """SIGTERM: kcat commits what it printed and leaves the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()
        for thread in self._threads:
            thread.join(5)
        self.check()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


class KcatClient(GroupClient):
    name = "kcat"
    default_protocol = "range"  # librdkafka's partition.assignment.strategy: range,roundrobin
    session_ms = SESSION_MS
    lacks = {
        MANUAL_COMMIT: "kcat commits only the records it printed",
        COMMITTED: "kcat cannot fetch committed offsets",
        ADMIN: "kcat has no admin API for groups",
        DELETE_GROUPS: "kcat has no admin API for groups",
        STATES_FILTER: "kcat has no admin API for groups",
        RIDES_OUT_RESTART: "kcat exits once all its broker connections are down",
    }

    def _join(self, bootstrap: str, group: str, client_id: str, options: JoinOptions) -> Kcat:
        return Kcat(bootstrap, group, client_id, options)

    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> Kcat:
        kcat = self.join(bootstrap, group, client_id, topics=(topic,))
        assert isinstance(kcat, Kcat)
        return kcat

    def close_all(self) -> None:
        """SIGTERM to all at once, then wait for each."""
        members, self.members = self.members, []
        for kcat in members:
            assert isinstance(kcat, Kcat)
            if kcat.process.poll() is None:
                kcat.process.send_signal(signal.SIGTERM)
        for kcat in members:
            assert isinstance(kcat, Kcat)
            try:
                kcat.process.wait(15)
            except subprocess.TimeoutExpired:
                kcat.kill()
