"""The `simple` assignor of share groups (Kafka's SimpleAssignor).

Share-group members do not own their partitions, so the assignment only has to spread
the work: every subscribed partition goes to at least one member subscribed to its
topic, and every member gets at least one partition when there are fewer partitions
than members (several members then share a partition). Within those rules a member
keeps the partitions it had, so that a member joining or leaving moves as little as
possible.
"""

from __future__ import annotations

from collections.abc import Mapping

from .share_group import ShareAssignment, TopicId


def assign_share_partitions(
    subscriptions: Mapping[str, tuple[str, ...]],
    assignable: Mapping[TopicId, frozenset[int]],
    topic_names: Mapping[TopicId, str],
    current: Mapping[str, ShareAssignment],
) -> dict[str, ShareAssignment]:
    """Each member's partitions. `subscriptions`: member -> topic names; the partitions
    that may be assigned (those whose share state is initialized) and the topics' names,
    by topic id; `current`: what each member has now."""
    members = sorted(subscriptions)
    found: dict[str, dict[TopicId, set[int]]] = {member: {} for member in members}
    # Topic by topic, among the members subscribed to it.
    for topic_id in sorted(assignable, key=str):
        name = topic_names[topic_id]
        readers = [m for m in members if name in subscriptions[m]]
        if not readers:
            continue
        partitions = sorted(assignable[topic_id])
        for member, indexes in _spread(readers, partitions, topic_id, current).items():
            if indexes:
                found[member].setdefault(topic_id, set()).update(indexes)
    return {
        member: {topic_id: frozenset(indexes) for topic_id, indexes in topics.items()}
        for member, topics in found.items()
    }


def _spread(
    readers: list[str],
    partitions: list[int],
    topic_id: TopicId,
    current: Mapping[str, ShareAssignment],
) -> dict[str, set[int]]:
    if not partitions:
        return {}
    spread: dict[str, set[int]] = {member: set() for member in readers}
    if len(partitions) >= len(readers):
        # Each partition to one member, balanced (counts differ by at most one), and a
        # member keeps what it had up to its share.
        wanted = set(partitions)
        had = {
            member: [i for i in sorted(current.get(member, {}).get(topic_id, ())) if i in wanted]
            for member in readers
        }
        low, extra = divmod(len(partitions), len(readers))
        by_holding = sorted(readers, key=lambda m: (-len(had[m]), readers.index(m)))
        share = {member: low + (1 if rank < extra else 0) for rank, member in enumerate(by_holding)}
        taken: set[int] = set()
        for member in readers:
            for index in had[member]:
                if len(spread[member]) < share[member] and index not in taken:
                    spread[member].add(index)
                    taken.add(index)
        free = [index for index in partitions if index not in taken]
        for member in readers:
            while len(spread[member]) < share[member]:
                spread[member].add(free.pop(0))
        return spread
    # More members than partitions: every member reads one partition, each partition
    # read by as even a share of the members as can be; a member keeps its partition
    # where that share allows.
    load = dict.fromkeys(partitions, 0)
    ceiling = -(-len(readers) // len(partitions))
    unplaced: list[str] = []
    for member in readers:
        kept = sorted(current.get(member, {}).get(topic_id, ()))
        place = next((i for i in kept if i in load and load[i] < ceiling), None)
        if place is None:
            unplaced.append(member)
            continue
        spread[member].add(place)
        load[place] += 1
    for member in unplaced:
        least = min(partitions, key=lambda i: (load[i], i))
        spread[member].add(least)
        load[least] += 1
    return spread
