"""The stopping broker's side of controlled shutdown (Kafka's KafkaServer.controlledShutdown
in ZooKeeper mode): before its listeners close, it asks the controller, over the
inter-broker listener, to hand the partitions it leads to other ISR members, so that
clients find new leaders while this one still answers (NOT_LEADER_OR_FOLLOWER, which
they retry) instead of a dead socket.

Up to controlled.shutdown.max.retries attempts, controlled.shutdown.retry.backoff.ms
apart; an attempt fails when no controller is known or reachable, when the controller
answers an error, or when partitions remain (no other ISR member can take them). The
broker stops either way, as Kafka's does. A single broker (no ZooKeeper) has no one to
hand anything to and skips it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.schema.types import BrokerId
from kio.static.primitive import i64

from brook.protocol.controlled_shutdown_schema import ControlledShutdownRequestV3
from brook.protocol.errors import ErrorCode, KafkaError

from ..observability.log_format import first_and_count

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from ..zookeeper.membership import ZkMembership
    from .inter_broker import InterBrokerClients

log = logging.getLogger("brook.controlled_shutdown")

NO_CONTROLLER = -1


async def controlled_shutdown(
    broker_id: int,
    config: BrokerConfig,
    membership: ZkMembership,
    inter_broker: InterBrokerClients,
) -> bool:
    """True when the controller moved every replicated partition this broker led."""
    retries: int = config["controlled.shutdown.max.retries"]
    backoff_s: float = config["controlled.shutdown.retry.backoff.ms"] / 1000
    log.info("Starting controlled shutdown of broker %d", broker_id)
    for attempt in range(1, retries + 1):
        if await _attempt(broker_id, membership, inter_broker):
            log.info("Controlled shutdown request returned successfully")
            return True
        if attempt < retries:
            log.warning(
                "Retrying controlled shutdown in %d ms (%d of %d attempts failed)",
                backoff_s * 1000,
                attempt,
                retries,
            )
            await asyncio.sleep(backoff_s)
    log.warning(
        "Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed"
    )
    return False


async def _attempt(
    broker_id: int, membership: ZkMembership, inter_broker: InterBrokerClients
) -> bool:
    controller = membership.controller_id
    if controller == NO_CONTROLLER:
        log.warning("Controlled shutdown: no controller is known")
        return False
    request = ControlledShutdownRequestV3(
        broker_id=BrokerId(broker_id), broker_epoch=i64(membership.broker_epoch)
    )
    try:
        response = await inter_broker.request(controller, request)
    except KafkaError as exc:
        log.warning("Controlled shutdown: controller %d: %s", controller, exc.message)
        return False
    if response.error_code != ErrorCode.none:
        log.warning(
            "Controlled shutdown: controller %d answered %s",
            controller,
            ErrorCode(response.error_code).name.upper(),
        )
        return False
    if response.remaining_partitions:
        names = [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]
        log.warning(
            "Controlled shutdown: controller %d answered that %d partition(s) have no other"
            " in-sync replica to lead them: %s",
            controller,
            len(names),
            first_and_count(names),
        )
        return False
    return True
