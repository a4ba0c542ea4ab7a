"""One follower fetcher: copies the partitions one leader leads (Kafka's
ReplicaFetcherThread, here a task on the broker's loop).

For each partition it first truncates what may have diverged from the leader, by
OffsetForLeaderEpoch (KIP-101/279): it asks where its latest epoch ends on the leader
and cuts its log there, round after round while the leader answers an epoch this log
does not have. Then it fetches from its log end with its broker id and the leader epoch
it knows, in an incremental fetch session (fetch_session_handler), appends what comes
back with the leader's offsets and epochs, and follows the leader's high watermark and
log start. Errors that new metadata will resolve (fenced epoch, not the leader) hold the
partition back for replica.fetch.backoff.ms; a lost connection holds the whole fetcher
back as long, then it connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.list_offsets.v7 import request as list_offsets_request
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_request
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from brook.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from brook.storage.errors import StorageError
from brook.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

from ..client import Client, ConnectionClosedError, InvalidResponseError
from ..observability.log_format import first_and_count
from ..replica.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ReplicaRole
from .fetch_session_handler import FetchSessionHandler, PartitionFetch

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from ..replica.partition import Partition

log = logging.getLogger("brook.replication.fetcher")

TopicPartition = tuple[str, int]
# (host, port) of the leader on the inter-broker listener, None while it is unknown.
EndpointLookup = Callable[[], tuple[str, int] | None]

# Errors that new metadata resolves (a leader or epoch this broker does not know yet):
# the partition waits for it, retrying after the backoff.
_WAIT_FOR_METADATA = frozenset(
    {
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
    }
)
_SESSION_ERRORS = frozenset(
    {ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch}
)
_NETWORK_ERRORS = (OSError, ConnectionClosedError, InvalidResponseError, TimeoutError)


@dataclass(eq=False)
class PartitionFetchState:
    partition: Partition
    # The leader epoch this state was made for: the fetcher sends it as the current
    # epoch, and a new one (from the metadata) makes a new state.
    leader_epoch: int
    truncated: bool = False
    delayed_until: float = 0.0  # loop time
    # What the last fetch asked of the partition, asked again as the same object while
    # nothing of it moves (the session then names only what did).
    last_fetch: PartitionFetch | None = None


class ReplicaFetcher:
    def __init__(
        self,
        source_broker_id: int,
        fetcher_id: int,
        local_broker_id: int,
        endpoint: EndpointLookup,
        config: Callable[[], BrokerConfig],
    ) -> None:
        self.source_broker_id = source_broker_id
        self.fetcher_id = fetcher_id
        self.local_broker_id = local_broker_id
        self._endpoint = endpoint
        self._config = config
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._client: Client | None = None
        self._session = FetchSessionHandler()
        self._failing = False  # the connection is down: say so once, and when it is back
        self._stopping = False
        # Fetch rounds answered so far: what a test waits on instead of sleeping.
        self.fetches = 0
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    @property
    def name(self) -> str:
        return (
            f"ReplicaFetcher-{self.fetcher_id}-{self.source_broker_id}"
            f" (broker {self.local_broker_id})"
        )

    # --- the partitions -----------------------------------------------------------------

    def add(self, partition: Partition) -> None:
        """Follow `partition` (again, with truncation first, when its epoch is new)."""
        key = (partition.topic, partition.index)
        current = self.states.get(key)
        if (
            current is not None
            and current.partition is partition
            and current.leader_epoch == partition.leader_epoch
        ):
            return
        self.states[key] = PartitionFetchState(partition, partition.leader_epoch)
        self._wakeup.set()

    def remove(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        current = self.states.get(key)
        if current is not None and current.partition is partition:
            del self.states[key]

    async def stop(self) -> None:
        # The flag as well as the cancel: a cancel that arrives as a request completes
        # can be lost inside asyncio's timeouts, and the loop must end all the same.
        self._stopping = True
        self._wakeup.set()
        await self._disconnect()  # fails the request in flight
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    # --- the loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            ready = self._ready(loop.time())
            if not ready:
                await self._idle(loop.time())
                continue
            try:
                client = await self._connect()
                # As Kafka's fetcher threads: truncate what is new, then fetch the rest,
                # every round. A partition still to truncate must not hold back the
                # others: while a topic of thousands reaches the follower a slice at a
                # time, each slice would otherwise take a round of its own, and the
                # partitions already followed none (an acks=all producer waited seconds).
                untruncated = [state for state in ready if not state.truncated]
                fetchable = ready
                if untruncated:
                    await self._truncate(client, untruncated)
                    # States may have been replaced, held back or truncated meanwhile.
                    now = loop.time()
                    fetchable = [
                        state
                        for state in ready
                        if state.truncated
                        and state.delayed_until <= now
                        and self.states.get((state.partition.topic, state.partition.index)) is state
                    ]
                if fetchable:
                    await self._fetch(client, fetchable)
                if self._failing:
                    log.info("%s: connected to broker %d again", self.name, self.source_broker_id)
                    self._failing = False
            except _NETWORK_ERRORS as exc:
                await self._disconnect()
                if self._stopping:
                    return
                if not self._failing:
                    log.warning(
                        "%s: lost broker %d (%s); retrying every %d ms",
                        self.name,
                        self.source_broker_id,
                        exc or type(exc).__name__,
                        self._config()["replica.fetch.backoff.ms"],
                    )
                    self._failing = True
                await asyncio.sleep(self._backoff_s())
            except Exception:
                # A bug must not end replication silently: say where, and go on.
                log.exception("%s: fetch round failed", self.name)
                await self._disconnect()
                await asyncio.sleep(self._backoff_s())

    def _ready(self, now: float) -> list[PartitionFetchState]:
        return [
            state
            for state in self.states.values()
            if state.delayed_until <= now
            and state.partition.role is ReplicaRole.FOLLOWER
            and not state.partition.is_offline
        ]

    async def _idle(self, now: float) -> None:
        """Nothing to fetch: wait for a partition to be added or a delay to end."""
        delays = [state.delayed_until - now for state in self.states.values()]
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(delays) if delays else None):
                await self._wakeup.wait()

    def _backoff_s(self) -> float:
        return float(self._config()["replica.fetch.backoff.ms"]) / 1000

    def _delay(self, state: PartitionFetchState) -> None:
        state.delayed_until = asyncio.get_running_loop().time() + self._backoff_s()

    async def _connect(self) -> Client:
        if self._client is not None:
            return self._client
        endpoint = self._endpoint()
        if endpoint is None:
            raise ConnectionClosedError(f"broker {self.source_broker_id} has no endpoint")
        host, port = endpoint
        config = self._config()
        timeout_s = config["replica.socket.timeout.ms"] / 1000
        security = None
        if config.security_protocol(config.inter_broker_listener_name) != "PLAINTEXT":
            from ..security.client_security import inter_broker_security

            security = inter_broker_security(config)
        async with asyncio.timeout(timeout_s):
            self._client = await Client.connect(
                host, port, client_id=f"broker-{self.local_broker_id}-fetcher", security=security
            )
        return self._client

    async def _disconnect(self) -> None:
        self._session.connection_lost()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _request(self, client: Client, request: Any, wait_ms: int = 0) -> Any:
        timeout_s = (self._config()["replica.socket.timeout.ms"] + wait_ms) / 1000
        async with asyncio.timeout(timeout_s):
            return await client.request(request)

    # --- truncation ---------------------------------------------------------------------

    async def _truncate(self, client: Client, states: list[PartitionFetchState]) -> None:
        """One round of OffsetForLeaderEpoch for the partitions not yet truncated."""
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        by_topic: dict[str, list[epoch_request.OffsetForLeaderPartition]] = {}
        for state in states:
            partition = state.partition
            latest = partition.log.leader_epoch_cache.latest_epoch
            if latest is None:
                # No epochs (an empty log, or one written before KIP-101): Kafka cuts
                # back to the high watermark, below which everything is committed.
                self._truncate_to(state, partition.high_watermark)
                continue
            asked[(partition.topic, partition.index)] = (state, latest)
            by_topic.setdefault(partition.topic, []).append(
                epoch_request.OffsetForLeaderPartition(
                    partition=i32(partition.index),
                    current_leader_epoch=i32(state.leader_epoch),
                    leader_epoch=i32(latest),
                )
            )
        if not by_topic:
            return
        response = await self._request(
            client,
            epoch_request.OffsetForLeaderEpochRequest(
                replica_id=BrokerId(self.local_broker_id),
                topics=tuple(
                    epoch_request.OffsetForLeaderTopic(
                        topic=TopicName(topic), partitions=tuple(partitions)
                    )
                    for topic, partitions in by_topic.items()
                ),
            ),
        )
        errors: list[tuple[PartitionFetchState, int]] = []
        for topic in response.topics:
            for answer in topic.partitions:
                entry = asked.get((topic.topic, answer.partition))
                if (
                    entry is None
                    or self.states.get((topic.topic, answer.partition)) is not entry[0]
                ):
                    continue
                state, _ = entry
                if answer.error_code != ErrorCode.none:
                    errors.append((state, answer.error_code))
                    continue
                self._apply_epoch_end_offset(state, answer.leader_epoch, answer.end_offset)
        self._partition_errors(errors, "OffsetForLeaderEpoch")

    def _apply_epoch_end_offset(
        self, state: PartitionFetchState, leader_epoch: int, leader_end_offset: int
    ) -> None:
        """Kafka's getOffsetTruncationState: where this log agrees with the leader's."""
        partition = state.partition
        log_end = partition.log_end_offset
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            # The leader knows no epoch up to ours (its log is older than KIP-101, or
            # ours holds epochs it never had): the high watermark is safe.
            self._truncate_to(state, partition.high_watermark)
            return
        cache = partition.log.leader_epoch_cache
        follower_epoch, follower_end = cache.end_offset_for(leader_epoch, log_end)
        if leader_epoch != UNDEFINED_EPOCH and follower_epoch != leader_epoch:
            # This log never had the leader's epoch: cut to where our last epoch below
            # it ends, and ask again with the epoch that leaves us.
            partition.truncate_to(min(follower_end, log_end))
            return
        self._truncate_to(state, min(leader_end_offset, follower_end, log_end))

    def _truncate_to(self, state: PartitionFetchState, offset: int) -> None:
        partition = state.partition
        if offset < partition.log_end_offset:
            log.info(
                "%s: truncating %s to offset %d to match leader %d (epoch %d)",
                self.name,
                partition.name,
                offset,
                self.source_broker_id,
                state.leader_epoch,
            )
            partition.truncate_to(offset)
        state.truncated = True

    # --- fetching -----------------------------------------------------------------------

    async def _fetch(self, client: Client, states: list[PartitionFetchState]) -> None:
        config = self._config()
        max_bytes = config["replica.fetch.max.bytes"]
        wanted: dict[TopicPartition, PartitionFetch] = {}
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for state in states:
            partition = state.partition
            key = (partition.topic, partition.index)
            local_log = partition.log
            fetch_offset = local_log.log_end_offset
            log_start_offset = local_log.log_start_offset
            sent[key] = (state, fetch_offset)
            fetch = state.last_fetch
            if (
                fetch is None
                or fetch.fetch_offset != fetch_offset
                or fetch.log_start_offset != log_start_offset
                or fetch.max_bytes != max_bytes
            ):
                fetch = state.last_fetch = PartitionFetch(
                    fetch_offset, log_start_offset, state.leader_epoch, max_bytes
                )
            wanted[key] = fetch
        # In the leader's fetch session only what changed is named (the leader reads
        # every partition of the session all the same).
        session_fetch = self._session.build(wanted)
        by_topic: dict[str, list[fetch_request.FetchPartition]] = {}
        for (topic, index), fetch in session_fetch.partitions.items():
            by_topic.setdefault(topic, []).append(
                fetch_request.FetchPartition(
                    partition=i32(index),
                    current_leader_epoch=i32(fetch.current_leader_epoch),
                    fetch_offset=i64(fetch.fetch_offset),
                    log_start_offset=i64(fetch.log_start_offset),
                    partition_max_bytes=i32(fetch.max_bytes),
                )
            )
        forgotten: dict[str, list[i32]] = {}
        for topic, index in session_fetch.forgotten:
            forgotten.setdefault(topic, []).append(i32(index))
        wait_ms = config["replica.fetch.wait.max.ms"]
        request = fetch_request.FetchRequest(
            replica_id=BrokerId(self.local_broker_id),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=wait_ms)),
            min_bytes=i32(config["replica.fetch.min.bytes"]),
            max_bytes=i32(config["replica.fetch.response.max.bytes"]),
            isolation_level=i8(0),
            session_id=i32(session_fetch.session_id),
            session_epoch=i32(session_fetch.epoch),
            topics=tuple(
                fetch_request.FetchTopic(topic=TopicName(topic), partitions=tuple(partitions))
                for topic, partitions in by_topic.items()
            ),
            forgotten_topics_data=tuple(
                fetch_request.ForgottenTopic(topic=TopicName(topic), partitions=tuple(indexes))
                for topic, indexes in forgotten.items()
            ),
            rack_id="",
        )
        response = await self._request(client, request, wait_ms)
        self.fetches += 1
        if not self._session.handle_response(
            session_fetch, response.error_code, response.session_id
        ):
            code = ErrorCode(response.error_code)
            if code in _SESSION_ERRORS:
                # The next fetch is a full one, at once: nothing is wrong with the
                # partitions (an evicted session, Kafka logs it at info too).
                log.info("%s: fetch session refused (%s); fetching in full", self.name, code.name)
                return
            log.warning("%s: fetch refused: %s", self.name, code.name)
            for state, _ in sent.values():
                self._delay(state)
            return
        out_of_range: list[PartitionFetchState] = []
        errors: list[tuple[PartitionFetchState, int]] = []
        for topic in response.responses:
            for data in topic.partitions:
                entry = sent.get((topic.topic, data.partition_index))
                if entry is None:
                    continue
                state, fetch_offset = entry
                if self.states.get((topic.topic, data.partition_index)) is not state:
                    continue  # removed, or re-added for a new epoch, while it was in flight
                if state.partition.log_end_offset != fetch_offset:
                    continue  # truncated meanwhile: the next fetch asks again
                if data.error_code == ErrorCode.offset_out_of_range:
                    out_of_range.append(state)
                elif data.error_code != ErrorCode.none:
                    errors.append((state, data.error_code))
                else:
                    self._process(state, data)
        self._partition_errors(errors, "Fetch")
        if out_of_range:
            await self._handle_out_of_range(client, out_of_range)

    def _process(self, state: PartitionFetchState, data: Any) -> None:
        partition = state.partition
        try:
            partition.append_records_as_follower(data.records or b"", data.high_watermark)
            leader_log_start = min(data.log_start_offset, partition.high_watermark)
            if leader_log_start > partition.log_start_offset:
                partition.log.maybe_increment_log_start_offset(leader_log_start)
        except KafkaStorageError as exc:
            log.error("%s: %s went offline: %s", self.name, partition.name, exc.message)
            self.remove(partition)
        except (KafkaError, StorageError, ValueError) as exc:
            # The leader sent what this log cannot take (offsets below its end, a bad
            # batch): nothing of it was kept; try again after the backoff.
            log.error("%s: could not append to %s: %s", self.name, partition.name, exc)
            self._delay(state)

    async def _handle_out_of_range(self, client: Client, states: list[PartitionFetchState]) -> None:
        """The fetch offset is outside the leader's log (Kafka's handleOutOfRangeError):
        past its end, this log holds what the leader lost (an unclean election) and is
        cut back to it; below its start, the leader deleted it, and this log starts
        over empty at the leader's start."""
        ends = await self._list_offsets(client, states, LATEST_TIMESTAMP)
        starts = await self._list_offsets(client, states, EARLIEST_TIMESTAMP)
        for state in states:
            partition = state.partition
            key = (partition.topic, partition.index)
            if key not in ends or key not in starts or self.states.get(key) is not state:
                self._delay(state)
                continue
            if ends[key] < partition.log_end_offset:
                log.warning(
                    "%s: %s is ahead of leader %d (log end %d > %d): truncating to its end",
                    self.name,
                    partition.name,
                    self.source_broker_id,
                    partition.log_end_offset,
                    ends[key],
                )
                partition.truncate_to(ends[key])
            else:
                log.warning(
                    "%s: %s starts over at leader %d's log start %d (it fetched from %d)",
                    self.name,
                    partition.name,
                    self.source_broker_id,
                    starts[key],
                    partition.log_end_offset,
                )
                partition.log.truncate_fully_and_start_at(starts[key])

    async def _list_offsets(
        self, client: Client, states: list[PartitionFetchState], timestamp: int
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[list_offsets_request.ListOffsetsPartition]] = {}
        for state in states:
            by_topic.setdefault(state.partition.topic, []).append(
                list_offsets_request.ListOffsetsPartition(
                    partition_index=i32(state.partition.index),
                    current_leader_epoch=i32(state.leader_epoch),
                    timestamp=i64(timestamp),
                )
            )
        response = await self._request(
            client,
            list_offsets_request.ListOffsetsRequest(
                replica_id=BrokerId(self.local_broker_id),
                isolation_level=i8(0),
                topics=tuple(
                    list_offsets_request.ListOffsetsTopic(
                        name=TopicName(topic), partitions=tuple(partitions)
                    )
                    for topic, partitions in by_topic.items()
                ),
            ),
        )
        return {
            (topic.name, answer.partition_index): int(answer.offset)
            for topic in response.topics
            for answer in topic.partitions
            if answer.error_code == ErrorCode.none
        }

    def _partition_errors(self, errors: list[tuple[PartitionFetchState, int]], api: str) -> None:
        """Hold back the partitions a response refused, and say so in one line a code:
        a leadership moving thousands of partitions refuses them all at once."""
        by_code: dict[ErrorCode, list[str]] = {}
        for state, error in errors:
            by_code.setdefault(ErrorCode(error), []).append(state.partition.name)
            self._delay(state)
        for code, names in by_code.items():
            shown = first_and_count(names)
            if code in _WAIT_FOR_METADATA:
                log.info(
                    "%s: %s of %s answered %s; waiting for new metadata",
                    self.name,
                    api,
                    shown,
                    code.name,
                )
            else:
                log.warning("%s: %s of %s failed: %s", self.name, api, shown, code.name)
