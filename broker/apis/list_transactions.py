"""ListTransactions (key 66), v0-v1: the transactional ids this coordinator holds,
filtered by state name, producer id, and (v1) by running longer than a duration.

A state filter that names no state comes back in `unknown_state_filters`, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.transaction_metadata import STATE_NAMES, TransactionState
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

STATES_BY_NAME = {name: state for state, name in STATE_NAMES.items()}


class ListTransactionsRequestView(Protocol):
    """What the handler reads of a ListTransactionsRequest in every served version; the
    duration filter (v1) is read where the version has it."""

    @property
    def state_filters(self) -> Sequence[str]: ...
    @property
    def producer_id_filters(self) -> Sequence[int]: ...


if TYPE_CHECKING:
    from kio.schema.list_transactions import v0, v1

    def _served_requests_are_views(
        r0: v0.ListTransactionsRequest, r1: v1.ListTransactionsRequest
    ) -> list[ListTransactionsRequestView]:
        return [r0, r1]


@handles(ApiKey.LIST_TRANSACTIONS)
def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    unknown = tuple(name for name in request.state_filters if name not in STATES_BY_NAME)
    wanted_states = {STATES_BY_NAME[n] for n in request.state_filters if n in STATES_BY_NAME}
    wanted_producers = set(request.producer_id_filters)
    running_longer_than = getattr(request, "duration_filter", -1)  # v1
    now = ctx.services.clock()
    listed = []
    every = list(ctx.services.transactions.transactions())  # read twice: names, then states
    # Only the transactional ids the principal may describe are listed.
    hidden = denied(
        ctx,
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        (t.transactional_id for t in every),
    )
    for found in every:
        if found.transactional_id in hidden:
            continue
        if request.state_filters and found.state not in wanted_states:
            continue
        if wanted_producers and found.producer_id not in wanted_producers:
            continue
        if running_longer_than >= 0 and not (
            found.state is TransactionState.ONGOING
            and now - found.txn_start_timestamp > running_longer_than
        ):
            continue
        listed.append(
            build(
                types.TransactionState,
                transactional_id=found.transactional_id,
                producer_id=found.producer_id,
                transaction_state=STATE_NAMES[found.state],
            )
        )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(listed),
    )
