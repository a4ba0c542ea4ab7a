"""Keyed timers on the fake clock: a key's timer is replaced, cancelled, fired in order."""

from __future__ import annotations

from brook.broker.coordinator.mock_time import MockTime, MockTimer


def test_timers_fire_in_deadline_order_with_the_clock_at_their_deadline() -> None:
    time = MockTime(0)
    timer = MockTimer(time)
    fired: list[tuple[str, int]] = []
    timer.schedule("late", 300, lambda: fired.append(("late", time())))
    timer.schedule("early", 100, lambda: fired.append(("early", time())))
    timer.schedule(
        "again",
        200,
        lambda: timer.schedule("chained", 50, lambda: fired.append(("chained", time()))),
    )
    time.sleep(299)
    assert fired == [("early", 100), ("chained", 250)]
    time.sleep(1)
    assert fired[-1] == ("late", 300) and len(timer) == 0


def test_scheduling_a_key_again_replaces_its_timer_and_cancel_removes_it() -> None:
    time = MockTime(0)
    timer = MockTimer(time)
    fired: list[str] = []
    timer.schedule("session", 100, lambda: fired.append("first"))
    time.sleep(90)
    timer.schedule("session", 100, lambda: fired.append("second"))  # a heartbeat
    time.sleep(99)
    assert fired == [] and timer.deadline_of("session") == 190
    timer.cancel("session")
    timer.cancel("unknown")  # nothing to cancel: nothing happens
    time.sleep(1000)
    assert fired == [] and not timer.is_scheduled("session")


def test_a_failing_timer_does_not_stop_the_others() -> None:
    time = MockTime(0)
    timer = MockTimer(time)
    fired: list[str] = []
    timer.schedule("broken", 10, lambda: 1 / 0)  # type: ignore[func-returns-value]
    timer.schedule("fine", 20, lambda: fired.append("fine"))
    time.sleep(20)
    assert fired == ["fine"]
