"""The error a transaction API's version can answer (its classes are in protocol/errors.py)."""

from __future__ import annotations

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

# KIP-588 (Kafka 2.7): the versions from which each API answers PRODUCER_FENCED; older
# clients know only INVALID_PRODUCER_EPOCH for a fenced producer.
_PRODUCER_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def error_for_version(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """The error as the request's version can say it."""
    if error is ErrorCode.producer_fenced and api_version < _PRODUCER_FENCED_SINCE.get(
        ApiKey(api_key), 0
    ):
        return ErrorCode.invalid_producer_epoch
    return error
