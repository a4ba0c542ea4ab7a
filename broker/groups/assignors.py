"""The server-side assignors of Kafka 4's consumer groups (KIP-848): `uniform` and `range`.

The coordinator, not a member, decides who consumes what. An assignor sees each
member's subscribed topics (by topic id) and current target assignment, and the
partition count of each subscribed topic; it answers a target assignment for every
member. Both are deterministic (the same input gives the same answer on any broker, so
a failed-over coordinator computes what the old one would have) and sticky: a
partition stays with its member unless balance or the subscription says otherwise, so
members not affected by a change keep consuming.

- `uniform` (Kafka's default): every member ends within one partition of every other
  member that could take it. When all members subscribe to the same topics the
  partitions are dealt by quota (P // N each, the first P % N members with one more,
  members already holding more keep their extra first); otherwise each partition goes
  to the least loaded member subscribed to its topic, and partitions then move, one at
  a time, from a member to a less loaded one while the two differ by more than one.
- `range`: per topic, the subscribed members in member-id order take contiguous ranges
  (P // M each, the first P % M one more), so members subscribed to the same topics get
  the same partition numbers of each (co-partitioning, as Kafka's range assignor).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

TopicId = uuid.UUID
# What one member is assigned: topic id -> partitions.
Assignment = dict[TopicId, frozenset[int]]


@dataclass(frozen=True)
class MemberSubscription:
    """One member as an assignor sees it."""

    subscribed_topic_ids: frozenset[TopicId]
    # Its current target assignment: where stickiness starts from.
    assignment: Mapping[TopicId, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSubscription], partition_counts: Mapping[TopicId, int]
    ) -> dict[str, Assignment]:
        """A target assignment for every member; a topic missing from `partition_counts`
        does not exist (any more) and is assigned to nobody."""
        ...


def _freeze(owned: Mapping[TopicId, Iterable[int]]) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in owned.items() if parts}


def _current(
    member: MemberSubscription, partition_counts: Mapping[TopicId, int]
) -> list[tuple[TopicId, int]]:
    """A member's current partitions that it may still keep: of a topic it subscribes
    to, that exists, below its partition count; in a stable order."""
    kept: list[tuple[TopicId, int]] = []
    for topic, partitions in member.assignment.items():
        count = partition_counts.get(topic)
        if count is None or topic not in member.subscribed_topic_ids:
            continue
        kept.extend((topic, p) for p in partitions if 0 <= p < count)
    kept.sort(key=lambda tp: (str(tp[0]), tp[1]))
    return kept


class UniformAssignor:
    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSubscription], partition_counts: Mapping[TopicId, int]
    ) -> dict[str, Assignment]:
        if not members:
            return {}
        subscriptions = {m.subscribed_topic_ids for m in members.values()}
        if len(subscriptions) == 1:
            return self._homogeneous(members, partition_counts)
        return self._heterogeneous(members, partition_counts)

    @staticmethod
    def _homogeneous(
        members: Mapping[str, MemberSubscription], partition_counts: Mapping[TopicId, int]
    ) -> dict[str, Assignment]:
        topics = sorted(
            (t for t in next(iter(members.values())).subscribed_topic_ids if t in partition_counts),
            key=str,
        )
        every = [(t, p) for t in topics for p in range(partition_counts[t])]
        order = sorted(members)
        min_quota, extras = divmod(len(every), len(order))
        owned: dict[str, list[tuple[TopicId, int]]] = {}
        taken: set[tuple[TopicId, int]] = set()
        # Members holding more than the minimum keep their extra partition first, so that
        # a change moves as few partitions as it can.
        current = {m: _current(members[m], partition_counts) for m in order}
        for member_id in sorted(order, key=lambda m: (-len(current[m]), m)):
            kept = [tp for tp in current[member_id] if tp not in taken]
            quota = min_quota
            if extras and len(kept) > min_quota:
                quota += 1
                extras -= 1
            kept = kept[:quota]
            taken.update(kept)
            owned[member_id] = kept
        free = iter(tp for tp in every if tp not in taken)
        for member_id in order:
            while len(owned[member_id]) < min_quota:
                owned[member_id].append(next(free))
        for member_id in order:
            if not extras:
                break
            if len(owned[member_id]) == min_quota:
                owned[member_id].append(next(free))
                extras -= 1
        return {m: _group(owned[m]) for m in order}

    @staticmethod
    def _heterogeneous(
        members: Mapping[str, MemberSubscription], partition_counts: Mapping[TopicId, int]
    ) -> dict[str, Assignment]:
        subscribers: dict[TopicId, list[str]] = {}
        for member_id in sorted(members):
            for topic in members[member_id].subscribed_topic_ids:
                if topic in partition_counts:
                    subscribers.setdefault(topic, []).append(member_id)
        owner: dict[tuple[TopicId, int], str] = {}
        owned: dict[str, set[tuple[TopicId, int]]] = {m: set() for m in members}
        for member_id in sorted(members):
            for tp in _current(members[member_id], partition_counts):
                if tp not in owner:
                    owner[tp] = member_id
                    owned[member_id].add(tp)
        # Topics with the fewest subscribers first: their partitions have the fewest
        # places to go, so they are placed while those places are least loaded.
        for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), str(t))):
            for partition in range(partition_counts[topic]):
                tp = (topic, partition)
                if tp in owner:
                    continue
                target = min(subscribers[topic], key=lambda m: (len(owned[m]), m))
                owner[tp] = target
                owned[target].add(tp)
        _rebalance(owner, owned, subscribers)
        return {m: _group(sorted(owned[m], key=lambda tp: (str(tp[0]), tp[1]))) for m in members}


def _rebalance(
    owner: dict[tuple[TopicId, int], str],
    owned: dict[str, set[tuple[TopicId, int]]],
    subscribers: Mapping[TopicId, list[str]],
) -> None:
    """Move partitions from the most loaded members to less loaded ones subscribed to
    their topic, while some pair differs by more than one. Each move lowers the sum of
    squared loads, so the loop ends."""
    heap = [(-len(parts), m) for m, parts in owned.items()]
    heapq.heapify(heap)
    while heap:
        negative, member_id = heapq.heappop(heap)
        if -negative != len(owned[member_id]):
            continue  # a stale entry: the member's load changed since
        moved = False
        for tp in sorted(owned[member_id], key=lambda tp: (str(tp[0]), -tp[1])):
            target = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
            if len(owned[member_id]) - len(owned[target]) > 1:
                owned[member_id].discard(tp)
                owned[target].add(tp)
                owner[tp] = target
                heapq.heappush(heap, (-len(owned[target]), target))
                moved = True
                break
        if moved:
            heapq.heappush(heap, (-len(owned[member_id]), member_id))


def _group(partitions: Iterable[tuple[TopicId, int]]) -> Assignment:
    grouped: dict[TopicId, set[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, set()).add(partition)
    return _freeze(grouped)


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Mapping[str, MemberSubscription], partition_counts: Mapping[TopicId, int]
    ) -> dict[str, Assignment]:
        owned: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
        topics = {t for m in members.values() for t in m.subscribed_topic_ids}
        for topic in sorted(topics, key=str):
            count = partition_counts.get(topic)
            if count is None:
                continue
            subscribed = sorted(m for m, s in members.items() if topic in s.subscribed_topic_ids)
            per_member, extra = divmod(count, len(subscribed))
            start = 0
            for index, member_id in enumerate(subscribed):
                length = per_member + (1 if index < extra else 0)
                if length:
                    owned[member_id][topic] = set(range(start, start + length))
                start += length
        return {m: _freeze(parts) for m, parts in owned.items()}


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
