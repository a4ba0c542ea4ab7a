"""What a handler knows about the request it serves beyond the request body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brook.protocol.api_table import response_type

from ..security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from brook.protocol.errors import ErrorCode

    from ..faults import RequestFaults
    from ..observability.request_metrics import RequestTiming
    from ..quotas.manager import QuotaRequest
    from .services import BrokerServices


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    connection: Any  # the KafkaConnection the request came on
    # The listener the request came in on: the endpoints handed out are its own.
    listener_name: str = "PLAINTEXT"
    # Who sent it: User:ANONYMOUS on PLAINTEXT, the SASL user, the mapped certificate name.
    principal: KafkaPrincipal = ANONYMOUS
    # What armed faults do to this request (None, nearly always).
    faults: RequestFaults | None = None
    # When it arrived and was handled, for /metrics (None unless admin.listener is set).
    timing: RequestTiming | None = None
    # What client quotas measure of it (None unless some quota is configured).
    quota: QuotaRequest | None = None

    def injected_error(self, topic: str, partition: int | None = None) -> ErrorCode | None:
        """The error a fault injects for this partition (or topic), if any."""
        return self.faults.partition_error(topic, partition) if self.faults else None

    @property
    def who(self) -> str:
        """Who sent the request, as log lines about a client name it: peer and client id."""
        return f"{self.peer} (client {self.client_id!r})"

    @property
    def response_type(self) -> Any:
        """The kio response class of this request's API version."""
        return response_type(self.api_key, self.api_version)
