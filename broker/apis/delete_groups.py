"""DeleteGroups (key 42), v0-v2: delete empty groups and their committed offsets (and a
share group's state in `__share_group_state`).

A group with members is NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND. Deletion
writes tombstones to __consumer_offsets, so it survives a restart.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


class DeleteGroupsRequestView(Protocol):
    """What the handler reads of a DeleteGroupsRequest (every served version has it)."""

    @property
    def groups_names(self) -> Sequence[str]: ...


if TYPE_CHECKING:
    from kio.schema.delete_groups import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.DeleteGroupsRequest, r1: v1.DeleteGroupsRequest, r2: v2.DeleteGroupsRequest
    ) -> list[DeleteGroupsRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.DELETE_GROUPS)
def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequestView) -> Any:
    # Every group's deletion starts now; the response waits for those still writing.
    refused = denied(ctx, AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    answers = [
        ErrorCode.group_authorization_failed if group_id in refused else _delete(ctx, group_id)
        for group_id in request.groups_names
    ]
    errors = [answer for answer in answers if not inspect.isawaitable(answer)]
    if len(errors) < len(answers):
        return _await_all(ctx, request.groups_names, answers)
    return _response(ctx, request.groups_names, errors)


def _delete(ctx: RequestContext, group_id: str) -> ErrorCode | Awaitable[ErrorCode]:
    share_group = ctx.services.groups.share_group(group_id)
    if share_group is not None:
        return _delete_share_group(ctx, group_id, list(share_group.state_partitions.initialized))
    return ctx.services.groups.delete_group(group_id)


async def _delete_share_group(
    ctx: RequestContext, group_id: str, topic_ids: list[Any]
) -> ErrorCode:
    """As Kafka: the share group's state in `__share_group_state` goes first; only then
    the group's records (a group whose state could not be deleted stays)."""
    try:
        partitions = ctx.services.groups.share_offsets_to_delete(group_id, topic_ids)
        persister = ctx.services.share_partitions.persister
        for topic_id, indexes in partitions.items():
            for index in sorted(indexes):
                await persister.delete_state(group_id, topic_id, index)
    except KafkaError as exc:
        return exc.error_code
    answer = ctx.services.groups.delete_group(group_id)
    return await answer if inspect.isawaitable(answer) else answer


async def _await_all(
    ctx: RequestContext, group_ids: Sequence[str], answers: list[ErrorCode | Awaitable[ErrorCode]]
) -> Any:
    errors = [await a if inspect.isawaitable(a) else a for a in answers]
    return _response(ctx, group_ids, errors)


def _response(ctx: RequestContext, group_ids: Sequence[str], errors: list[ErrorCode]) -> Any:
    types = schema_module(ctx.response_type)
    results = tuple(
        build(types.DeletableGroupResult, group_id=group_id, error_code=error)
        for group_id, error in zip(group_ids, errors, strict=True)
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, results=results)
