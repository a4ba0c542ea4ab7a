"""The server-side assignors of consumer groups (KIP-848): balance, stickiness, range's
co-partitioning, and subscriptions that differ between members."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.broker.groups.assignors import (
    ASSIGNORS,
    Assignment,
    MemberSubscription,
    RangeAssignor,
    UniformAssignor,
)

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def sizes(assignment: dict[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(p) for p in parts.values()) for m, parts in assignment.items()}


def owners(assignment: dict[str, Assignment]) -> Counter[tuple[uuid.UUID, int]]:
    return Counter((t, p) for parts in assignment.values() for t, ps in parts.items() for p in ps)


def members(
    *names: str, topics: frozenset[uuid.UUID] = frozenset({T1})
) -> dict[str, MemberSubscription]:
    return {name: MemberSubscription(topics) for name in names}


def test_the_default_is_uniform_and_both_are_known_by_kafkas_names() -> None:
    assert list(ASSIGNORS) == ["uniform", "range"]


def test_uniform_shares_evenly_and_each_partition_once() -> None:
    assignment = UniformAssignor().assign(members("a", "b", "c"), {T1: 7})
    assert sorted(sizes(assignment).values()) == [2, 2, 3]
    assert owners(assignment) == Counter({(T1, p): 1 for p in range(7)})


def test_uniform_moves_only_what_a_new_member_needs() -> None:
    first = UniformAssignor().assign(members("a", "b"), {T1: 6})
    current = {m: MemberSubscription(frozenset({T1}), first[m]) for m in first}
    current["c"] = MemberSubscription(frozenset({T1}))
    second = UniformAssignor().assign(current, {T1: 6})
    assert sizes(second) == {"a": 2, "b": 2, "c": 2}
    # a and b each kept two of their three, and gave one to c.
    for member in ("a", "b"):
        assert second[member][T1] <= first[member][T1]


def test_uniform_keeps_everything_of_those_staying_when_one_leaves() -> None:
    first = UniformAssignor().assign(members("a", "b", "c"), {T1: 6})
    staying = {m: MemberSubscription(frozenset({T1}), first[m]) for m in ("a", "c")}
    second = UniformAssignor().assign(staying, {T1: 6})
    assert sizes(second) == {"a": 3, "c": 3}
    assert first["a"][T1] <= second["a"][T1] and first["c"][T1] <= second["c"][T1]


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers() -> None:
    subscriptions = {
        "a": MemberSubscription(frozenset({T1})),
        "b": MemberSubscription(frozenset({T1, T2})),
        "c": MemberSubscription(frozenset({T2})),
    }
    assignment = UniformAssignor().assign(subscriptions, {T1: 4, T2: 4})
    assert set(assignment["a"]) <= {T1} and set(assignment["c"]) <= {T2}
    assert owners(assignment) == Counter({(t, p): 1 for t in (T1, T2) for p in range(4)})
    assert max(sizes(assignment).values()) - min(sizes(assignment).values()) <= 1


def test_a_topic_that_is_gone_or_unsubscribed_is_given_up() -> None:
    current = {
        "a": MemberSubscription(frozenset({T1}), {T1: frozenset({0, 1}), T3: frozenset({0})})
    }
    assignment = UniformAssignor().assign(current, {T1: 2})
    assert assignment == {"a": {T1: frozenset({0, 1})}}


def test_range_gives_contiguous_ranges_with_the_same_numbers_of_each_topic() -> None:
    both = frozenset({T1, T2})
    assignment = RangeAssignor().assign(members("b", "a", topics=both), {T1: 5, T2: 5})
    assert assignment["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert assignment["b"] == {T1: frozenset({3, 4}), T2: frozenset({3, 4})}


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=3),
    subscriptions=st.lists(st.sets(st.integers(0, 2), min_size=1), min_size=1, max_size=6),
    name=st.sampled_from(sorted(ASSIGNORS)),
)
def test_every_existing_subscribed_partition_has_exactly_one_owner(
    counts: list[int], subscriptions: list[set[int]], name: str
) -> None:
    topics = [uuid.UUID(int=n + 1) for n in range(3)]
    partition_counts = {topics[i]: c for i, c in enumerate(counts)}
    subscribed = {
        f"m{i}": MemberSubscription(frozenset(topics[t] for t in ts))
        for i, ts in enumerate(subscriptions)
    }
    assignment = ASSIGNORS[name].assign(subscribed, partition_counts)
    wanted = {
        (t, p)
        for s in subscribed.values()
        for t in s.subscribed_topic_ids
        if t in partition_counts
        for p in range(partition_counts[t])
    }
    assert owners(assignment) == Counter(dict.fromkeys(wanted, 1))
    for member, parts in assignment.items():
        assert set(parts) <= subscribed[member].subscribed_topic_ids
    if name == "uniform" and len({s.subscribed_topic_ids for s in subscribed.values()}) == 1:
        loads = sizes(assignment).values()
        assert max(loads) - min(loads) <= 1
