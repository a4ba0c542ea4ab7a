"""The leadership lease's arithmetic on an injected monotonic clock: held from the
sending of the last request ZooKeeper answered, for a part of the session timeout."""

from __future__ import annotations

from brook.broker.zookeeper.leadership_lease import LEASE_PART_OF_SESSION, LeadershipLease


async def _never() -> None:
    raise AssertionError("not renewed in these tests")


def test_the_lease_runs_from_the_sending_of_the_answered_request():
    now = [100.0]
    lease = LeadershipLease(lambda: 6000, _never, monotonic=lambda: now[0])
    assert not lease.held()  # nothing answered yet
    lease.renewed(100.0)
    now[0] = 100.0 + 6 * LEASE_PART_OF_SESSION - 0.01
    assert lease.held()
    now[0] = 100.0 + 6 * LEASE_PART_OF_SESSION
    assert not lease.held()
    # An answer read after a pause to a request sent before it proves nothing new.
    lease.renewed(99.0)
    assert not lease.held()
    lease.renewed(now[0] - 1)
    assert lease.held()
