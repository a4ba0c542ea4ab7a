"""Brokers coming and going: a killed controller replaced by another with the next epoch,
a restarted broker rejoining, a clean stop leaving at once, a session that expires under
a frozen broker and the broker registering again in a new one."""

from __future__ import annotations

import os
import signal

from brook.broker.zookeeper.server import ZooKeeperServer

from .harness import Cluster, ZooKeeperView, eventually, metadata_of


def _start_three(cluster: Cluster, zk: ZooKeeperView) -> dict:
    brokers = {i: cluster.start(i, {"broker.rack": f"rack-{i}"}) for i in (1, 2, 3)}
    zk.wait_broker_ids([1, 2, 3])
    zk.wait_controller(lambda controller: controller is not None)
    return brokers


def _listed(brokers: dict, ids: list[int]) -> dict[int, tuple[str, int, str]]:
    return {i: ("127.0.0.1", brokers[i].port, f"rack-{i}") for i in ids}


def test_a_killed_controller_is_replaced_and_rejoins_on_restart(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = _start_three(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    epoch = zk.controller_epoch()
    brokers[controller].kill()
    # Its session times out (2 s in these tests), /controller goes, another one wins.
    successor = zk.wait_controller(lambda c: c is not None and c != controller)
    assert zk.controller_epoch() == epoch + 1
    survivors = sorted(set(brokers) - {controller})
    zk.wait_broker_ids(survivors)
    for broker_id in survivors:
        seen = eventually(
            lambda b=broker_id: metadata_of(brokers[b].port),
            lambda s: s.controller_id == successor and s.brokers == _listed(brokers, survivors),
        )
        assert seen.controller_id == successor
    assert "successfully elected as the controller" in brokers[successor].log_text()

    # Back on the same port and data: it registers again, and the controller stays.
    brokers[controller] = cluster.restart(
        brokers[controller], controller, extra={"broker.rack": f"rack-{controller}"}
    )
    zk.wait_broker_ids([1, 2, 3])
    for broker_id in (1, 2, 3):
        eventually(
            lambda b=broker_id: metadata_of(brokers[b].port),
            lambda s: s.controller_id == successor and s.brokers == _listed(brokers, [1, 2, 3]),
        )
    assert zk.json("/controller")["brokerid"] == successor
    assert zk.controller_epoch() == epoch + 1


def test_a_clean_stop_leaves_at_once(cluster: Cluster, zk: ZooKeeperView):
    brokers = _start_three(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    epoch = zk.controller_epoch()
    follower = next(i for i in brokers if i != controller)
    assert brokers[follower].stop() == 0
    # The process has exited: its session was closed, not left to time out.
    assert zk.exists(f"/brokers/ids/{follower}") is None
    assert "Closed the ZooKeeper session" in brokers[follower].log_text()
    remaining = sorted(set(brokers) - {follower})
    eventually(
        lambda: metadata_of(brokers[controller].port).brokers, lambda b: sorted(b) == remaining
    )

    # The controller stopped cleanly: /controller goes at once, the last broker wins.
    assert brokers[controller].stop() == 0
    assert zk.exists(f"/brokers/ids/{controller}") is None
    last = next(i for i in remaining if i != controller)
    assert zk.wait_controller(lambda c: c == last) == last
    assert zk.controller_epoch() == epoch + 1
    assert "successfully elected as the controller" in brokers[last].log_text()
    eventually(lambda: metadata_of(brokers[last].port), lambda s: s.controller_id == last)


def test_a_frozen_broker_registers_again_in_a_new_session(cluster: Cluster, zk: ZooKeeperView):
    """SIGSTOP: the broker stops answering ZooKeeper, its session expires and its znodes
    go; SIGCONT: it learns its session expired, and registers in a new one."""
    brokers = _start_three(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    owner = zk.get(f"/brokers/ids/{controller}")[1].ephemeralOwner
    frozen = brokers[controller]
    assert frozen.process is not None
    frozen.process.send_signal(signal.SIGSTOP)
    try:
        others = sorted(set(brokers) - {controller})
        zk.wait_broker_ids(others)
        successor = zk.wait_controller(lambda c: c is not None and c != controller)
    finally:
        frozen.process.send_signal(signal.SIGCONT)
    zk.wait_broker_ids([1, 2, 3])
    assert zk.get(f"/brokers/ids/{controller}")[1].ephemeralOwner != owner
    # It is no longer the controller, and says so; everyone agrees on the successor.
    for broker_id in (1, 2, 3):
        eventually(
            lambda b=broker_id: metadata_of(brokers[b].port),
            lambda s: s.controller_id == successor and sorted(s.brokers) == [1, 2, 3],
        )
    log = eventually(frozen.log_text, lambda text: "Resigning" in text)
    assert f"registering broker {controller} again" in log
    assert zk.json("/controller")["brokerid"] == successor


def test_a_broker_restarted_after_a_kill_waits_for_its_old_registration(
    cluster: Cluster, zk: ZooKeeperView
):
    """Kafka refuses a broker whose id is still registered by the session of the broker it
    replaces; Brook waits (up to the session timeout) for that registration to go.

    Broker 1's session lasts 15 s, not the tests' 2 s: on a loaded machine the restarted
    process took longer than 2 s to reach ZooKeeper, found the old registration gone, and
    had nothing to wait for."""
    long_session = {"zookeeper.session.timeout.ms": 15_000}
    first = cluster.start(1, long_session)
    second = cluster.start(2)
    zk.wait_broker_ids([1, 2])
    owner = zk.get("/brokers/ids/1")[1].ephemeralOwner
    first.kill()
    assert zk.exists("/brokers/ids/1") is not None  # still there: its session lives on
    restarted = cluster.restart(first, 1, extra=long_session)
    zk.wait_data(
        "/brokers/ids/1", lambda _, stat: stat is not None and stat.ephemeralOwner != owner
    )
    log = restarted.log_text()
    assert "waiting up to" in log and "/brokers/ids/1 is gone: registering broker 1" in log
    eventually(lambda: metadata_of(second.port).brokers, lambda b: sorted(b) == [1, 2])
    assert restarted.stop() == 0


def test_a_controller_cut_off_from_zookeeper_steps_down_on_its_own(
    cluster: Cluster, zk: ZooKeeperView, zookeeper: ZooKeeperServer
):
    """ZooKeeper frozen (SIGSTOP): no session can expire, and no broker hears from it. The
    controller stops acting as one after a quarter of its session timeout, before
    ZooKeeper could have expired its session; once ZooKeeper is back the cluster agrees on
    one controller again."""
    brokers = _start_three(cluster, zk)
    controller = zk.json("/controller")["brokerid"]
    assert zookeeper.process is not None
    os.kill(zookeeper.process.pid, signal.SIGSTOP)
    try:
        log = eventually(
            brokers[controller].log_text,
            lambda text: "acting as if the session had expired" in text,
        )
        assert "Resigning" in log
        assert all(b.process is not None and b.process.poll() is None for b in brokers.values())
    finally:
        os.kill(zookeeper.process.pid, signal.SIGCONT)
    zk.wait_broker_ids([1, 2, 3])
    agreed = zk.wait_controller(lambda c: c is not None)
    for broker_id in (1, 2, 3):
        eventually(
            lambda b=broker_id: metadata_of(brokers[b].port),
            lambda s: s.controller_id == agreed and sorted(s.brokers) == [1, 2, 3],
        )
