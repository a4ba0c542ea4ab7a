"""One module per API, named after it; each registers its handler for its API key.

A handler is called on the event loop in the order requests arrive on a connection.
It makes its state changes at once (so pipelined requests apply in order) and returns
either the response, an awaitable of the response (long polls, acks waits), or
NO_RESPONSE (Produce with acks=0).

A handler reads its request through a view: a read-only Protocol of the fields it reads,
typed as it uses them, at the top of its module (views.py holds those several APIs
share). kio has one class per message version, and each satisfies the views; a field that
only some versions have is read where present (getattr with a default), or through a view
of those versions once the handler has checked the version. Each module proves its views
for every version it serves in a `TYPE_CHECKING` block that mypy checks (a function,
`_served_requests_are_views`, returning each version's request class as its view), and
tests/broker/test_request_views.py checks that the proof names exactly the served versions.
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Awaitable, Callable
from functools import cache
from types import ModuleType
from typing import Any, TypeVar

from brook.protocol.api_table import SERVED, ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")
U = TypeVar("U")

NO_RESPONSE = object()
NO_THROTTLE = datetime.timedelta(0)

Handler = Callable[[Any, Any], Any | Awaitable[Any]]
HANDLERS: dict[int, Handler] = {}


def handles(api_key: ApiKey) -> Callable[[Handler], Handler]:
    """Register a handler for an API key of the served table."""

    def register(handler: Handler) -> Handler:
        if api_key not in SERVED:
            raise RuntimeError(f"{api_key.name} has a handler but no version range in SERVED")
        HANDLERS[api_key] = handler
        return handler

    return register


def handler_for(api_key: int) -> Handler:
    """The handler of an API, its module imported on the API's first request: a broker
    starts without importing what no client asks of it (each module is named after its
    API key: PRODUCE -> produce.py)."""
    handler = HANDLERS.get(api_key)
    if handler is None:
        importlib.import_module(f"{__name__}.{ApiKey(api_key).name.lower()}")
        handler = HANDLERS[api_key]
    return handler


def load_all() -> dict[int, Handler]:
    """Import every API module so that each registers itself, and check the table."""
    from . import (  # noqa: F401
        add_offsets_to_txn,
        add_partitions_to_txn,
        alter_client_quotas,
        alter_configs,
        alter_partition_reassignments,
        alter_replica_log_dirs,
        alter_share_group_offsets,
        alter_user_scram_credentials,
        api_versions,
        consumer_group_describe,
        consumer_group_heartbeat,
        controlled_shutdown,
        create_acls,
        create_partitions,
        create_topics,
        delete_acls,
        delete_groups,
        delete_records,
        delete_share_group_offsets,
        delete_share_group_state,
        delete_topics,
        describe_acls,
        describe_client_quotas,
        describe_cluster,
        describe_configs,
        describe_groups,
        describe_log_dirs,
        describe_producers,
        describe_share_group_offsets,
        describe_topic_partitions,
        describe_transactions,
        describe_user_scram_credentials,
        elect_leaders,
        end_txn,
        fetch,
        find_coordinator,
        heartbeat,
        incremental_alter_configs,
        init_producer_id,
        initialize_share_group_state,
        join_group,
        leave_group,
        list_groups,
        list_offsets,
        list_partition_reassignments,
        list_transactions,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        offset_for_leader_epoch,
        produce,
        read_share_group_state,
        read_share_group_state_summary,
        sasl_authenticate,
        sasl_handshake,
        share_acknowledge,
        share_fetch,
        share_group_describe,
        share_group_heartbeat,
        sync_group,
        txn_offset_commit,
        write_share_group_state,
        write_txn_markers,
    )

    missing = [key.name for key in SERVED if key not in HANDLERS]
    if missing:
        raise RuntimeError(f"APIs in the served table without a handler: {missing}")
    return HANDLERS


def build(entity_type: type, **fields: Any) -> Any:
    """Make a kio entity from the fields its version has, ignoring the others.

    One handler serves every version of its API; fields that a version lacks are
    simply not part of that version's entity. A field that no version of the message
    has is a misspelling in Brook: TypeError, rather than an answer without it.
    """
    known: dict[str, Any] = entity_type.__dataclass_fields__  # type: ignore[attr-defined]
    if not known.keys() >= fields.keys():
        misspelt = fields.keys() - fields_of_any_version(entity_type)
        if misspelt:
            raise TypeError(
                f"{entity_type.__module__}.{entity_type.__name__} has no field"
                f" {', '.join(sorted(misspelt))} in any version"
            )
    return entity_type(**{name: value for name, value in fields.items() if name in known})


_KIO_VERSIONED = re.compile(r"^(?P<api>.+)\.v\d+\.(?P<kind>\w+)$")
_VERSION_SUFFIX = re.compile(r"V\d+$")


@cache
def fields_of_any_version(entity_type: type) -> frozenset[str]:
    """The fields of the message `entity_type` is one version of, over all its versions:
    kio keeps each version in a module of its own (kio.schema.<api>.v<N>.<kind>), Brook's
    own schemas one class per version in one module (<Name>V<N>)."""
    found = _KIO_VERSIONED.match(entity_type.__module__)
    if found is not None:
        package = importlib.import_module(found["api"])
        versions = [
            importlib.import_module(f"{found['api']}.{info.name}.{found['kind']}")
            for info in pkgutil.iter_modules(package.__path__)
            if re.fullmatch(r"v\d+", info.name)
        ]
        classes = [getattr(module, entity_type.__name__, None) for module in versions]
    else:
        base = _VERSION_SUFFIX.sub("", entity_type.__name__)
        module = sys.modules[entity_type.__module__]
        classes = [
            value
            for value in vars(module).values()
            if isinstance(value, type) and _VERSION_SUFFIX.sub("", value.__name__) == base
        ]
    return frozenset(
        name
        for cls in classes
        if cls is not None
        for name in getattr(cls, "__dataclass_fields__", {})
    )


def schema_module(entity_type: type) -> ModuleType:
    """The kio module of an entity, which holds the nested types of the same version."""
    return sys.modules[entity_type.__module__]


def respond(answer: T | Awaitable[T], build_response: Callable[[T], Any]) -> Any:
    """The response built from an answer, at once or once an awaited answer comes (a
    coordinator answers when its records are committed)."""
    if inspect.isawaitable(answer):
        return _respond_later(answer, build_response)
    return build_response(answer)


def respond_later(answer: Awaitable[T], build_response: Callable[[T], Any]) -> Awaitable[Any]:
    """respond() for an answer that is always awaited (mypy infers T from an Awaitable[T]
    alone, where `T | Awaitable[T]` leaves a lambda's argument unknown)."""
    return _respond_later(answer, build_response)


def answer_or_error(answer: Awaitable[T], on_error: Callable[[ErrorCode], U]) -> Awaitable[T | U]:
    """The awaited answer, or `on_error` of the KafkaError it fails with (a coordinator's
    write that could not be made or committed), so the response carries the error."""
    return _answer_or_error(answer, on_error)


async def _answer_or_error(answer: Awaitable[T], on_error: Callable[[ErrorCode], U]) -> T | U:
    try:
        return await answer
    except KafkaError as exc:
        return on_error(exc.error_code)


async def _respond_later(answer: Awaitable[T], build_response: Callable[[T], Any]) -> Any:
    return build_response(await answer)
