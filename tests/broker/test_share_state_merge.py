"""The share coordinator's merge of a partition's stored state batches with those a write
brings (broker/share/share_coordinator.py, merge_batches): the newest state of each offset
wins, as runs of one state and delivery count, computed on the ranges' ends."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from brook.broker.share.share_coordinator import merge_batches
from brook.protocol.share_state_records import PersistedStateBatch

Batch = tuple[int, int, int, int]


def _offset_by_offset(stored: list[Batch], written: list[Batch], start: int) -> list[Batch]:
    """What the merge must give, worked out offset by offset (small spans only)."""
    states: dict[int, tuple[int, int]] = {}
    for first, last, state, count in (*stored, *written):
        for offset in range(max(first, start), last + 1):
            states[offset] = (state, count)
    runs: list[Batch] = []
    for offset in sorted(states):
        state, count = states[offset]
        if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, count):
            runs[-1] = (runs[-1][0], offset, state, count)
        else:
            runs.append((offset, offset, state, count))
    return runs


def _merged(stored: list[Batch], written: list[Batch], start: int) -> list[Batch]:
    result = merge_batches(
        [PersistedStateBatch(*b) for b in stored], [PersistedStateBatch(*b) for b in written], start
    )
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result]


batches = st.lists(
    st.tuples(st.integers(0, 60), st.integers(-1, 20), st.integers(0, 4), st.integers(0, 3)).map(
        lambda b: (b[0], b[0] + b[1], b[2], b[3])
    ),
    max_size=8,
)


@given(batches, batches, st.integers(0, 40))
def test_the_merge_is_what_each_offset_says(
    stored: list[Batch], written: list[Batch], start: int
) -> None:
    assert _merged(stored, written, start) == _offset_by_offset(stored, written, start)


def test_later_written_batches_win_and_equal_neighbours_join() -> None:
    stored = [(0, 9, 2, 1)]
    written = [(5, 7, 0, 1), (6, 6, 4, 2), (8, 9, 2, 1)]
    assert _merged(stored, written, 3) == [(3, 4, 2, 1), (5, 5, 0, 1), (6, 6, 4, 2),
                                           (7, 7, 0, 1), (8, 9, 2, 1)]  # fmt: skip


def test_a_batch_spanning_any_number_of_offsets_costs_nothing_more() -> None:
    huge = 2**62
    written = [(0, huge, 2, 1), (10, 10, 0, 1), (huge - 1, huge + 5, 4, 3)]
    assert _merged([], written, 0) == [
        (0, 9, 2, 1),
        (10, 10, 0, 1),
        (11, huge - 2, 2, 1),
        (huge - 1, huge + 5, 4, 3),
    ]
    many = [(i * 10, i * 10 + 9, random.Random(i).randrange(5), 1) for i in range(20_000)]
    assert len(_merged(many, [], 0)) <= 20_000
