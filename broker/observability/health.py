"""GET /v1/health and GET /v1/ready: what Docker's HEALTHCHECK and Kubernetes' probes ask.

Live: the event loop, which serves every client, runs a request of the admin endpoint
within LIVE_TIMEOUT_S. While the broker starts (recovering its logs can hold the loop for
a long time), it is live: it is making progress, and a liveness probe that killed it
then would only make it recover again.

Ready: the broker serves. Its log dirs are loaded (one at least online), every
configured listener is bound, and in a cluster it is registered in ZooKeeper (and not cut
off from it) and every partition it follows is in its ISR, so that a rolling restart
waits for each broker to catch up before it stops the next. Not ready is answered 503
with every reason.
"""

from __future__ import annotations

from typing import Any

from .broker_state import BrokerState
from .collector import BrokerView

# How long the event loop may take to answer /v1/health.
LIVE_TIMEOUT_S = 5.0


def readiness(view: BrokerView) -> dict[str, Any]:
    """{"ready": bool, "reasons": [...], ...}; run on the broker's loop."""
    state = BrokerState(view.state())
    services = view.services()
    answer: dict[str, Any] = {"broker_id": view.broker_id, "state": state.title}
    if state is not BrokerState.RUNNING or services is None:
        answer.update(ready=False, reasons=[f"the broker is {state.title}"])
        return answer
    reasons = []
    log_manager = services.log_manager
    online = log_manager.online_dirs
    if not online:
        reasons.append("no log dir is online")
    offline = [str(d) for d in log_manager.log_dirs if d not in online]
    config = services.config
    bound = {listener.name for listener in services.listeners.bound}
    unbound = [listener.name for listener in config.listeners if listener.name not in bound]
    if unbound:
        reasons.append(f"listener(s) not bound: {', '.join(unbound)}")
    # A single broker registers itself (and follows nothing): these hold at once there.
    if services.metadata.broker(view.broker_id) is None:
        where = "in ZooKeeper" if config["zookeeper.connect"] else "yet"
        reasons.append(f"not registered {where}")
    if getattr(services.membership, "fenced", False):
        reasons.append("cut off from ZooKeeper (its session is presumed lost)")
    lagging = _followers_out_of_isr(services, view.broker_id)
    if lagging:
        shown = ", ".join(lagging[:10]) + (" ..." if len(lagging) > 10 else "")
        reasons.append(f"{len(lagging)} followed partition(s) not in the ISR: {shown}")
    answer.update(ready=not reasons, reasons=reasons)
    if offline:
        answer["offline_log_dirs"] = offline
    return answer


def _followers_out_of_isr(services: Any, broker_id: int) -> list[str]:
    """Partitions with a leader elsewhere that this broker replicates, while it is
    outside their ISR (catching up)."""
    return sorted(
        partition.name
        for partition in services.replicas.partitions()
        if partition.leader_id >= 0
        and partition.leader_id != broker_id
        and broker_id not in partition.isr
        and not partition.is_offline
    )
