"""The `simple` assignor of share groups, as Kafka's SimpleAssignor computes it.

Share-group members do not own their partitions: a partition may be read by several
members, each record going to one of them. The assignor spreads the work evenly: with N
partitions and M members, each partition is read by ceil(M / N) members (one when there
are at least as many partitions as members), and the members' counts of partitions differ
by at most one. Members that subscribe to the same topics are assigned over all their
partitions at once; otherwise each topic is assigned among its own subscribers.

It is sticky, as Kafka's: a member keeps what it had, as far as its share allows, and only
the rest moves. Kafka walks its members in the order of a Java hash map, so which member
gets the larger share can differ from Brook's (member ids in order): the counts, the
sharing and every property above are the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from .share_group import ShareAssignment, TopicId

TopicPartition = tuple[TopicId, int]


def assign_share_partitions(
    subscriptions: Mapping[str, tuple[str, ...]],
    assignable: Mapping[TopicId, frozenset[int]],
    topic_names: Mapping[TopicId, str],
    current: Mapping[str, ShareAssignment],
) -> dict[str, ShareAssignment]:
    """Each member's partitions. `subscriptions`: member -> topic names; the partitions
    that may be assigned (those whose share state is initialized) and the topics' names,
    by topic id; `current`: each member's target assignment until now."""
    members = sorted(subscriptions)
    ids = {name: topic_id for topic_id, name in topic_names.items()}
    subscribed = {
        member: frozenset(ids[name] for name in subscriptions[member] if name in ids)
        for member in members
    }
    assigned: dict[str, set[TopicPartition]] = {member: set() for member in members}
    topic_sets = set(subscribed.values())
    if len(topic_sets) == 1:
        # Homogeneous: every member reads the same topics, assigned over all of them.
        (topics,) = topic_sets
        _assign(members, _partitions(topics, assignable), current, topics, assigned)
    else:
        for topic_id in sorted({t for topics in subscribed.values() for t in topics}, key=str):
            readers = [m for m in members if topic_id in subscribed[m]]
            _assign(
                readers,
                _partitions({topic_id}, assignable),
                current,
                frozenset({topic_id}),
                assigned,
            )
    return {member: _by_topic(partitions) for member, partitions in assigned.items()}


def _partitions(
    topics: frozenset[TopicId] | set[TopicId], assignable: Mapping[TopicId, frozenset[int]]
) -> list[TopicPartition]:
    return sorted(
        ((topic_id, index) for topic_id in topics for index in assignable.get(topic_id, ())),
        key=lambda tp: (str(tp[0]), tp[1]),
    )


def _by_topic(partitions: set[TopicPartition]) -> ShareAssignment:
    found: dict[TopicId, set[int]] = {}
    for topic_id, index in partitions:
        found.setdefault(topic_id, set()).add(index)
    return {topic_id: frozenset(indexes) for topic_id, indexes in found.items()}


def _desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """How many members read each partition, and how many partitions each member reads
    (Kafka's desiredSharing and desiredAssignmentCount, in exact arithmetic)."""
    if partitions == 0:
        return 0, [0] * members
    sharing = -(-members // partitions)
    total = sharing * partitions
    # ceil(total * (i + 1) / members) - ceil(total * i / members), as Kafka's doubles give.
    counts = [-(-total * (i + 1) // members) - -(-total * i // members) for i in range(members)]
    return sharing, counts


def _assign(
    members: list[str],
    partitions: list[TopicPartition],
    current: Mapping[str, ShareAssignment],
    topics: frozenset[TopicId],
    assigned: dict[str, set[TopicPartition]],
) -> None:
    """Assign `partitions` among `members` (their reads of `topics` only), into `assigned`."""
    if not members or not partitions:
        return
    sharing, counts = _desired_counts(len(members), len(partitions))
    desired = dict(zip(members, counts, strict=True))
    target = set(partitions)
    order = {tp: position for position, tp in enumerate(partitions)}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    held: dict[str, list[TopicPartition]] = {member: [] for member in members}
    # What each member had of these topics and still may have.
    for member in members:
        for topic_id, indexes in current.get(member, {}).items():
            if topic_id not in topics:
                continue
            for index in sorted(indexes):
                tp = (topic_id, index)
                if tp in target:
                    held[member].append(tp)
    # A member over its share gives up partitions until it is at it.
    for member in members:
        keep = sorted(held[member], key=order.__getitem__)[: desired[member]]
        held[member] = keep
        for tp in keep:
            holders[tp].append(member)
    # A partition read by more members than its share keeps the first of them.
    for tp in partitions:
        for member in holders[tp][sharing:]:
            held[member].remove(tp)
        del holders[tp][sharing:]
    # The rest, round-robin over the members short of their share.
    unfilled = [m for m in members if len(held[m]) < desired[m]]
    for tp in partitions:
        if not unfilled:
            break
        need = sharing - len(holders[tp])
        position = 0
        placed_in_pass = False
        while need > 0 and unfilled:
            if position >= len(unfilled):
                if not placed_in_pass:
                    break  # no member short of its share can take this partition
                position, placed_in_pass = 0, False
            member = unfilled[position]
            if tp in held[member]:
                position += 1
                continue
            held[member].append(tp)
            holders[tp].append(member)
            need -= 1
            placed_in_pass = True
            if len(held[member]) >= desired[member]:
                unfilled.pop(position)
            else:
                position += 1
    for member in members:
        assigned[member].update(held[member])
