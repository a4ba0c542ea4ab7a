"""Requests from this broker to the others: the transaction coordinator's markers to
partition leaders, a partition leader's transaction checks with a coordinator (Kafka's
TransactionMarkerChannelManager and AddPartitionsToTxnManager, over its NetworkClient).

One connection per broker, on the inter-broker listener, made on first use and again
after a failure. A broker that cannot be reached answers NETWORK_EXCEPTION (a KafkaError,
retriable), as Kafka's client reports a lost connection to its callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..client import Client
    from ..config.broker_config import BrokerConfig
    from ..metadata.cache import MetadataCache


class NetworkError(KafkaError):
    error_code = ErrorCode.network_exception


class InterBrokerClients:
    def __init__(
        self, local_broker_id: int, metadata: MetadataCache, config: Callable[[], BrokerConfig]
    ) -> None:
        self.local_broker_id = local_broker_id
        self._metadata = metadata
        self._config = config
        self._clients: dict[int, Client] = {}
        self._connecting: dict[int, asyncio.Future[Client]] = {}

    async def request(self, broker_id: int, request: Any, timeout_s: float = 30.0) -> Any:
        """Send `request` to broker `broker_id` and return its response's body."""
        # The wire client loads with the first request to another broker.
        from ..client import ConnectionClosedError, InvalidResponseError

        try:
            async with asyncio.timeout(timeout_s):
                client = await self._client(broker_id)
                return await client.request(request)
        except (OSError, ConnectionClosedError, InvalidResponseError, TimeoutError) as exc:
            await self._drop(broker_id)
            raise NetworkError(
                f"Broker {broker_id} could not be reached: {_reason(exc, timeout_s)}"
            ) from None

    async def _client(self, broker_id: int) -> Client:
        client = self._clients.get(broker_id)
        if client is not None:
            return client
        connecting = self._connecting.get(broker_id)
        if connecting is None:
            connecting = asyncio.ensure_future(self._connect(broker_id))
            self._connecting[broker_id] = connecting
            connecting.add_done_callback(lambda _: self._connecting.pop(broker_id, None))
        return await asyncio.shield(connecting)

    async def _connect(self, broker_id: int) -> Client:
        from ..client import Client, ConnectionClosedError

        endpoint = self._metadata.endpoint(broker_id, self._config().inter_broker_listener_name)
        if endpoint is None:
            raise ConnectionClosedError(f"broker {broker_id} is not alive or has no endpoint")
        config = self._config()
        security = None
        if config.security_protocol(config.inter_broker_listener_name) != "PLAINTEXT":
            from ..security.client_security import inter_broker_security

            security = inter_broker_security(config)
        client = await Client.connect(
            endpoint.host,
            endpoint.port,
            client_id=f"broker-{self.local_broker_id}",
            security=security,
        )
        self._clients[broker_id] = client
        return client

    async def _drop(self, broker_id: int) -> None:
        client = self._clients.pop(broker_id, None)
        if client is not None:
            await client.close()

    async def close(self) -> None:
        for broker_id in list(self._clients):
            await self._drop(broker_id)


def _reason(exc: BaseException, timeout_s: float) -> str:
    """Why a request failed, never empty (a timeout's own message is)."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return str(exc) or type(exc).__name__
