"""The share groups' `simple` assignor (KIP-932), as Kafka's SimpleAssignor computes it:
Kafka's own worked examples, and the properties for any group (every partition read by
a member subscribed to it, counts balanced, sticky)."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.broker.groups.share_assignor import assign_share_partitions

TOPICS = {uuid.UUID(int=n + 1): f"t{n}" for n in range(3)}
T0, T1, _ = TOPICS


def _counts(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[int]:
    return sorted(
        (sum(len(p) for p in topics.values()) for topics in assignment.values()), reverse=True
    )


def _readers(
    assignment: dict[str, dict[uuid.UUID, frozenset[int]]],
) -> Counter[tuple[uuid.UUID, int]]:
    return Counter(
        (topic, index)
        for topics in assignment.values()
        for topic, indexes in topics.items()
        for index in indexes
    )


def test_three_members_eight_partitions_get_three_three_and_two() -> None:
    members = {f"m{i}": ("t0",) for i in range(3)}
    assignment = assign_share_partitions(members, {T0: frozenset(range(8))}, TOPICS, {})
    assert _counts(assignment) == [3, 3, 2]
    assert set(_readers(assignment).values()) == {1}


def test_five_members_two_partitions_share_each_partition_three_ways() -> None:
    members = {f"m{i}": ("t0",) for i in range(5)}
    assignment = assign_share_partitions(members, {T0: frozenset(range(2))}, TOPICS, {})
    assert _counts(assignment) == [2, 1, 1, 1, 1]
    assert _readers(assignment) == {(T0, 0): 3, (T0, 1): 3}


def test_members_of_the_same_topics_are_assigned_over_all_of_them() -> None:
    """Two members, two topics of one partition each: one partition each (not both)."""
    members = {"a": ("t0", "t1"), "b": ("t0", "t1")}
    assignable = {T0: frozenset({0}), T1: frozenset({0})}
    assignment = assign_share_partitions(members, assignable, TOPICS, {})
    assert _counts(assignment) == [1, 1]
    assert set(_readers(assignment)) == {(T0, 0), (T1, 0)}


def test_a_joining_member_moves_as_little_as_it_can() -> None:
    before = assign_share_partitions(
        {"a": ("t0",), "b": ("t0",)}, {T0: frozenset(range(6))}, TOPICS, {}
    )
    after = assign_share_partitions(
        {"a": ("t0",), "b": ("t0",), "c": ("t0",)}, {T0: frozenset(range(6))}, TOPICS, before
    )
    assert _counts(after) == [2, 2, 2]
    for member in ("a", "b"):
        assert after[member][T0] <= before[member][T0]  # kept, nothing new


@settings(max_examples=300, deadline=None)
@given(
    partitions=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    subscriptions=st.lists(
        st.sets(st.sampled_from(["t0", "t1", "t2"]), min_size=1), min_size=1, max_size=8
    ),
    homogeneous=st.booleans(),
    leaving=st.integers(0, 7),
)
def test_every_partition_is_read_and_counts_are_balanced(
    partitions: list[int], subscriptions: list[set[str]], homogeneous: bool, leaving: int
) -> None:
    names = [f"t{i}" for i in range(len(partitions))]
    topics = dict(list(TOPICS.items())[: len(partitions)])
    assignable = {t: frozenset(range(n)) for t, n in zip(topics, partitions, strict=True)}
    members = {
        f"m{i}": tuple(names) if homogeneous else tuple(sorted(s & set(names)) or names[:1])
        for i, s in enumerate(subscriptions)
    }
    first = assign_share_partitions(members, assignable, topics, {})
    # A member leaves, and the assignment is made again from the first one.
    members.pop(f"m{leaving}", None)
    current = {m: first[m] for m in members}
    for assignment in (first, assign_share_partitions(members, assignable, topics, current)):
        readers = _readers(assignment)
        for topic, name in topics.items():
            subscribed = [m for m in assignment if m in members and name in members[m]]
            for index in assignable[topic]:
                if subscribed:
                    assert readers[(topic, index)] >= 1
        for member, got in assignment.items():
            if member in members:
                assert all(topics[t] in members[member] for t in got)
        if homogeneous and all(m in members for m in assignment):
            counts = _counts(assignment)
            assert not counts or counts[0] - counts[-1] <= 1
