"""`python -m bench.scale_clients`: how a broker's costs grow with its clients, Brook beside
Apache Kafka and Tansu in one run.

Each broker is started once, with a topic of 10 partitions, and a bystander (bench.scale's:
a producer and a Metadata client, one request every 20 ms each) runs throughout. Then, one
after another, over raw Kafka-protocol connections from this process (asyncio):

1. Connections: `--connections` connections opened (each answered one ApiVersions), held
   idle for 3 s, then closed. Reported: the time to open them all, the broker's RSS while
   they are held, the bystander's p99 and worst latency over the phase.
2. Consumer groups: `--groups` groups, one connection each, find their coordinator, then
   commit the offsets of the 10 partitions (OffsetCommit v8, as a client without group
   membership commits) `--rounds` times. Reported: commits a second, their p50 and p99
   latency, failed commits, RSS after.
3. Idempotent producers: `--producers` producers, one connection each, get a producer id
   (InitProducerId) and send `--rounds` batches of 10 x 100 B in sequence (acks=all) to a
   partition each. Reported: batches a second, their p50 and p99 latency, failures, RSS.
4. Consumers that do not read: `--stalled-consumers` connections (a 64 KB receive buffer
   each) send one Fetch of `--stalled-mb` MB (the whole of a topic that holds that much)
   and never read the response; held 5 s, then closed. Reported: RSS while they are held
   and the bystander's latency. Several sizes (`--stalled-mb 5 20 50`) run the phase once
   each, on a topic of each size: how memory grows with the data a consumer leaves unread.

    python -m bench.scale_clients                  # about 5 minutes on 2 cores
    python -m bench.scale_clients --only brook --connections 1000 --groups 100 --producers 100
    (a count of 0 skips its phase)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import resource
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kio.static.primitive import i32Timedelta

from bench.cli import add_broker_selection, bench_parser
from brook.broker.client import Client
from brook.broker.local_ports import free_port
from brook.protocol.record_batch import Record, build_batch

from .brokers import BROKER_NAMES, BROOK, SPECS, BrokerSpec, brook_spec
from .kafka_admin import NewTopic
from .procs import BrokerProcess
from .report import ratio_parts
from .scale import RESULTS_DIR, Bystander, Latencies, create_bystander_topic, quiet_admin, rss_mib

TOPIC = "clients"
STALLED_TOPIC = "stalled"
PARTITIONS = 10
START_TIMEOUT_S = 120.0
# Connections opened at once: a burst of thousands of SYNs overflows the listen backlog.
OPENING_AT_ONCE = 200


@dataclass
class PhaseResult:
    count: int
    seconds: float | None = None
    per_second: float | None = None
    latency: dict[str, float | int] = field(default_factory=dict)
    failures: int = 0
    rss_mib: float | None = None
    bystander_produce: dict[str, float | int] = field(default_factory=dict)
    bystander_metadata: dict[str, float | int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class ClientsRun:
    broker: str
    rss_idle_mib: float | None = None
    connections: PhaseResult | None = None
    groups: PhaseResult | None = None
    producers: PhaseResult | None = None
    # The phase at the largest --stalled-mb; each size's in stalled_by_mb.
    stalled: PhaseResult | None = None
    stalled_by_mb: dict[int, PhaseResult] = field(default_factory=dict)
    error: str | None = None


async def _connect_all(port: int, count: int) -> list[Client]:
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    clients: list[Client] = []

    async def one() -> Client:
        client = await Client.connect("127.0.0.1", port, client_id="bench-scale")
        await asyncio.wait_for(client.request(ApiVersionsRequest()), 60)
        return client

    for start in range(0, count, OPENING_AT_ONCE):
        batch = range(start, min(count, start + OPENING_AT_ONCE))
        clients += await asyncio.gather(*(one() for _ in batch))
    return clients


async def _close_all(clients: list[Client]) -> None:
    await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


# The request a client sends in a round: (client's index, round) -> request.
Request = Callable[[int, int], Any]


async def _rounds(
    port: int,
    count: int,
    rounds: int,
    prepare: Callable[[list[Client]], Awaitable[Request]],
    check: Callable[[Any], bool],
    result: PhaseResult,
    latencies: Latencies,
) -> None:
    """`count` connections, made ready by `prepare` (not timed), then `rounds` timed
    requests each: the rate and the failures into `result`."""
    clients = await _connect_all(port, count)
    try:
        make = await prepare(clients)
        began = time.perf_counter()
        result.failures = await _timed_requests(clients, rounds, make, check, latencies)
        result.per_second = count * rounds / (time.perf_counter() - began)
    finally:
        await _close_all(clients)


async def _timed_requests(
    clients: list[Client],
    rounds: int,
    make: Callable[[int, int], Any],
    check: Callable[[Any], bool],
    latencies: Latencies,
) -> int:
    """Each client sends `rounds` requests one after another (`make(client, round)`);
    returns how many failed (`check` false or an error)."""
    failures = 0

    async def run(index: int, client: Client) -> None:
        nonlocal failures
        for round_no in range(rounds):
            started = time.perf_counter()
            try:
                response = await asyncio.wait_for(client.request(make(index, round_no)), 60)
                ok = check(response)
            except Exception:
                ok = False
            latencies.add(time.perf_counter() - started)
            failures += not ok

    await asyncio.gather(*(run(i, client) for i, client in enumerate(clients)))
    return failures


def _commit_request(group: str) -> Any:
    from kio.schema.offset_commit.v8 import request as commit

    return commit.OffsetCommitRequest(
        group_id=group,  # type: ignore[arg-type]
        generation_id_or_member_epoch=-1,  # type: ignore[arg-type]
        member_id="",
        group_instance_id=None,
        topics=(
            commit.OffsetCommitRequestTopic(
                name=TOPIC,  # type: ignore[arg-type]
                partitions=tuple(
                    commit.OffsetCommitRequestPartition(
                        partition_index=p,  # type: ignore[arg-type]
                        committed_offset=0,  # type: ignore[arg-type]
                        committed_leader_epoch=-1,  # type: ignore[arg-type]
                        committed_metadata="",
                    )
                    for p in range(PARTITIONS)
                ),
            ),
        ),
    )


async def _find_coordinator(client: Client, group: str) -> None:
    """FindCoordinator until the group has one (COORDINATOR_NOT_AVAILABLE while the offsets
    topic is being made), then a first commit until it is taken (Kafka answers
    NOT_COORDINATOR while its coordinator loads the partition), as a client retries."""
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    deadline = time.perf_counter() + 60
    found = False
    while True:
        if not found:
            request = FindCoordinatorRequest(key=group, key_type=0)  # type: ignore[arg-type]
            found = (await client.request(request)).error_code == 0
        if found and _committed(await client.request(_commit_request(group))):
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"group {group} found no coordinator to commit to")
        await asyncio.sleep(0.1)


def _committed(response: Any) -> bool:
    return all(p.error_code == 0 for t in response.topics for p in t.partitions)


def _produce_request(partition: int, producer_id: int, epoch: int, sequence: int) -> Any:
    from kio.schema.produce.v9 import request as produce

    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(i, now, None, b"x" * 100) for i in range(10)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    return produce.ProduceRequest(
        transactional_id=None,
        acks=-1,  # type: ignore[arg-type]
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            produce.TopicProduceData(
                name=TOPIC,  # type: ignore[arg-type]
                partition_data=(
                    produce.PartitionProduceData(index=partition, records=batch),  # type: ignore[arg-type]
                ),
            ),
        ),
    )


def _produced(response: Any) -> bool:
    return all(p.error_code == 0 for t in response.responses for p in t.partition_responses)


def _stalled_topic(megabytes: int) -> str:
    return f"{STALLED_TOPIC}-{megabytes}mb"


def _unread_fetches(port: int, count: int, topic: str) -> list[socket.socket]:
    """`count` connections, each with one Fetch of the whole of `topic` sent and its
    response left unread."""
    from brook.protocol.client_wire import encode_request

    request = encode_request(_stalled_fetch(topic), 1, "bench-stalled")
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.connect(("127.0.0.1", port))
        sock.sendall(request)
        sockets.append(sock)
    return sockets


def _stalled_fetch(topic: str) -> Any:
    from kio.schema.fetch.v11 import request as fetch

    whole = 1 << 30
    return fetch.FetchRequest(
        replica_id=-1,  # type: ignore[arg-type]
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
        min_bytes=1,  # type: ignore[arg-type]
        max_bytes=whole,  # type: ignore[arg-type]
        isolation_level=0,  # type: ignore[arg-type]
        session_id=0,  # type: ignore[arg-type]
        session_epoch=-1,  # type: ignore[arg-type]
        topics=(
            fetch.FetchTopic(
                topic=topic,  # type: ignore[arg-type]
                partitions=(
                    fetch.FetchPartition(
                        partition=0,  # type: ignore[arg-type]
                        current_leader_epoch=-1,  # type: ignore[arg-type]
                        fetch_offset=0,  # type: ignore[arg-type]
                        log_start_offset=-1,  # type: ignore[arg-type]
                        partition_max_bytes=whole,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _fill_stalled_topic(bootstrap: str, megabytes: int, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})
    value = b"s" * 1000
    for i in range(megabytes * 1000):
        producer.produce(topic, value, partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the stalled topic could not be filled")


async def _init_producer_ids(clients: list[Client]) -> list[tuple[int, int]]:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    request = InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=-1,  # type: ignore[arg-type]
        producer_epoch=-1,  # type: ignore[arg-type]
    )
    responses = await asyncio.gather(*(client.request(request) for client in clients))
    return [(int(r.producer_id), int(r.producer_epoch)) for r in responses]


async def _phase(
    broker: BrokerProcess,
    bystander: Bystander,
    count: int,
    work: Callable[[PhaseResult, Latencies], Awaitable[None]],
) -> PhaseResult:
    result = PhaseResult(count)
    latencies = Latencies()
    bystander.produce.clear()
    bystander.metadata.clear()
    started = time.perf_counter()
    try:
        await work(result, latencies)
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = time.perf_counter() - started
    result.latency = latencies.summary()
    result.bystander_produce = bystander.produce.summary()
    result.bystander_metadata = bystander.metadata.summary()
    if result.rss_mib is None:
        result.rss_mib = rss_mib(broker)
    return result


async def _run_phases(broker: BrokerProcess, run: ClientsRun, args: argparse.Namespace) -> None:
    with Bystander(broker.bootstrap) as bystander:
        await asyncio.sleep(1.0)
        run.rss_idle_mib = rss_mib(broker)

        async def connections(result: PhaseResult, _: Latencies) -> None:
            clients = await _connect_all(broker.port, args.connections)
            result.per_second = len(clients) / (time.perf_counter() - started)
            await asyncio.sleep(3.0)
            result.rss_mib = rss_mib(broker)
            await _close_all(clients)

        started = time.perf_counter()
        if args.connections:
            run.connections = await _phase(broker, bystander, args.connections, connections)

        async def groups(result: PhaseResult, latencies: Latencies) -> None:
            async def prepare(clients: list[Client]) -> Request:
                # Each finds its coordinator and commits once first, as a client does
                # (the first makes __consumer_offsets): not what is measured.
                await asyncio.gather(
                    *(_find_coordinator(c, f"bench-group-{i}") for i, c in enumerate(clients))
                )
                return lambda index, _: _commit_request(f"bench-group-{index}")

            await _rounds(
                broker.port, args.groups, args.rounds, prepare, _committed, result, latencies
            )

        if args.groups:
            run.groups = await _phase(broker, bystander, args.groups, groups)

        async def producers(result: PhaseResult, latencies: Latencies) -> None:
            async def prepare(clients: list[Client]) -> Request:
                ids = await _init_producer_ids(clients)
                return lambda index, round_no: _produce_request(
                    index % PARTITIONS, ids[index][0], ids[index][1], round_no * 10
                )

            await _rounds(
                broker.port, args.producers, args.rounds, prepare, _produced, result, latencies
            )

        if args.producers:
            run.producers = await _phase(broker, bystander, args.producers, producers)

        def stalled(topic: str) -> Callable[[PhaseResult, Latencies], Awaitable[None]]:
            async def work(result: PhaseResult, _: Latencies) -> None:
                began = time.perf_counter()
                sockets = await asyncio.to_thread(
                    _unread_fetches, broker.port, args.stalled_consumers, topic
                )
                try:
                    result.per_second = len(sockets) / (time.perf_counter() - began)
                    await asyncio.sleep(5.0)
                    result.rss_mib = rss_mib(broker)
                finally:
                    for sock in sockets:
                        sock.close()

            return work

        if args.stalled_consumers:
            for megabytes in sorted(args.stalled_mb):
                run.stalled = await _phase(
                    broker, bystander, args.stalled_consumers, stalled(_stalled_topic(megabytes))
                )
                run.stalled_by_mb[megabytes] = run.stalled


def measure(spec: BrokerSpec, args: argparse.Namespace, work: Path, log_path: Path) -> ClientsRun:
    run = ClientsRun(spec.name)
    data = work / spec.name
    port = free_port()
    broker = BrokerProcess(spec.build_argv(port, data), port, log_path, spec.env)
    try:
        broker.start(START_TIMEOUT_S)
        admin = quiet_admin(broker.bootstrap)
        create_bystander_topic(admin)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
        if args.stalled_consumers:
            for megabytes in args.stalled_mb:
                topic = _stalled_topic(megabytes)
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
                _fill_stalled_topic(broker.bootstrap, megabytes, topic)
        del admin
        asyncio.run(_run_phases(broker, run, args))
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    return run


def _fmt(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def print_table(runs: list[ClientsRun]) -> None:
    print(
        f"{'broker':>9s} {'phase':>14s} {'count':>7s} {'s':>7s} {'per s':>9s}"
        f" {'p50 ms':>8s} {'p99 ms':>8s} {'failed':>6s} {'RSS MiB':>8s}"
        f" {'bystander p99/max ms':>21s}"
    )
    for run in runs:
        print(f"{run.broker:>9s} {'idle':>14s} {'':>7s} {'':>7s} {'':>9s} {'':>8s} {'':>8s}"
              f" {'':>6s} {_fmt(run.rss_idle_mib):>8s}")  # fmt: skip
        rows: list[tuple[str, PhaseResult | None]] = [
            (name, getattr(run, name)) for name in ("connections", "groups", "producers")
        ]
        if len(run.stalled_by_mb) > 1:
            rows += [(f"stalled {mb}MB", p) for mb, p in sorted(run.stalled_by_mb.items())]
        else:
            rows.append(("stalled", run.stalled))
        for name, phase in rows:
            if phase is None:
                continue
            bystander = (
                f"{_fmt(phase.bystander_produce.get('p99_ms'))}"
                f"/{_fmt(phase.bystander_produce.get('max_ms'))}"
            )
            print(
                f"{run.broker:>9s} {name:>14s} {phase.count:>7,d} {_fmt(phase.seconds, 1):>7s}"
                f" {_fmt(phase.per_second):>9s} {_fmt(phase.latency.get('p50_ms'), 1):>8s}"
                f" {_fmt(phase.latency.get('p99_ms'), 1):>8s} {phase.failures:>6d}"
                f" {_fmt(phase.rss_mib):>8s} {bystander:>21s}"
            )
            if phase.error:
                print(f"    {run.broker} {name} failed: {phase.error}")
        if run.error:
            print(f"    {run.broker} failed: {run.error}")


def print_ratios(runs: list[ClientsRun]) -> None:
    """Brook's figures over each peer's, phase by phase, where both ran it with as many
    clients (rates: above 1, Brook is faster; RSS and latencies: above 1, Brook takes more)."""
    brook_runs = [run for run in runs if run.broker == BROOK]
    for brook in brook_runs:
        for peer in runs:
            if peer.broker == BROOK:
                continue
            figures: list[tuple[str, float | None, float | None]] = [
                ("idle RSS", brook.rss_idle_mib, peer.rss_idle_mib)
            ]
            for name, _ in PHASES:
                mine, theirs = getattr(brook, name), getattr(peer, name)
                if mine is None or theirs is None or mine.count != theirs.count:
                    continue
                # The stalled phase's rate is only how fast its fetches went out.
                rate = (None, None) if name == "stalled" else (mine.per_second, theirs.per_second)
                figures += [
                    (f"{name} rate", *rate),
                    (f"{name} p99", mine.latency.get("p99_ms"), theirs.latency.get("p99_ms")),
                    (f"{name} RSS", mine.rss_mib, theirs.rss_mib),
                ]
            parts = ratio_parts(figures)
            if parts:
                print(f"Brook/{peer.broker}: {', '.join(parts)}")


PHASES = (
    ("connections", "connections open"),
    ("groups", "groups committing"),
    ("producers", "idempotent producers"),
    ("stalled", "consumers not reading a fetch"),
)


def write_chart(runs: list[ClientsRun], path: Path) -> Path:
    """RSS against the number of clients of each phase, one line per broker (runs of
    several sizes, e.g. two saved scale_clients.json)."""
    from .chart import GrowthPanel, write_growth_chart

    def points(broker: str, name: str) -> list[tuple[float, float]]:
        phases = [getattr(run, name) for run in runs if run.broker == broker]
        return [(p.count, p.rss_mib) for p in phases if p is not None and p.rss_mib is not None]

    return write_growth_chart(
        [
            GrowthPanel(title, title, {b: points(b, name) for b in BROKER_NAMES}, "RSS (MiB)")
            for name, title in PHASES
        ],
        "Broker memory against clients (one broker, this machine)",
        path,
    )


def write_data_chart(runs: list[ClientsRun], path: Path) -> Path:
    """The stalled consumers' phase against the size of what each fetched and left
    unread: the broker's RSS and the bystander's p99, one line per broker."""
    from .chart import GrowthPanel, write_growth_chart

    def points(
        broker: str, value: Callable[[PhaseResult], float | None]
    ) -> list[tuple[float, float]]:
        found = []
        for run in runs:
            if run.broker != broker:
                continue
            for megabytes, phase in run.stalled_by_mb.items():
                y = value(phase)
                if y is not None:
                    found.append((float(megabytes), float(y)))
        return found

    counts = sorted({p.count for run in runs for p in run.stalled_by_mb.values()})
    xlabel = "MB each consumer fetches and never reads"
    panels: list[tuple[str, str, Callable[[PhaseResult], float | None]]] = [
        ("RSS (MiB)", "RSS (MiB)", lambda p: p.rss_mib),
        ("bystander produce p99 (ms)", "ms", lambda p: p.bystander_produce.get("p99_ms")),
    ]
    return write_growth_chart(
        [
            GrowthPanel(title, xlabel, {b: points(b, value) for b in BROKER_NAMES}, ylabel)
            for title, ylabel, value in panels
        ],
        f"Broker memory against the data {'/'.join(map(str, counts))} consumers leave unread",
        path,
    )


def _load_runs(path: Path) -> list[ClientsRun]:
    runs = []
    for saved in json.loads(path.read_text()):
        run = ClientsRun(saved["broker"], saved.get("rss_idle_mib"), error=saved.get("error"))
        for name, _ in PHASES:
            if saved.get(name):
                setattr(run, name, PhaseResult(**saved[name]))
        run.stalled_by_mb = {
            int(mb): PhaseResult(**phase) for mb, phase in saved.get("stalled_by_mb", {}).items()
        }
        runs.append(run)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("python -m bench.scale_clients", __doc__)
    parser.add_argument(
        "--connections", type=int, default=10_000, help="idle connections held open at once"
    )
    parser.add_argument("--groups", type=int, default=1_000, help="consumer groups committing")
    parser.add_argument(
        "--producers", type=int, default=1_000, help="idempotent producers sending batches"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="commits a group, and batches a producer, sends"
    )
    parser.add_argument(
        "--stalled-consumers",
        type=int,
        default=1_000,
        help="connections that send a Fetch and never read its response",
    )
    parser.add_argument(
        "--stalled-mb",
        type=int,
        nargs="+",
        default=[50],
        help="MB each stalled consumer fetches; several sizes run the phase once each",
    )
    add_broker_selection(parser, RESULTS_DIR)
    parser.add_argument(
        "--chart-from",
        type=Path,
        nargs="+",
        help="draw the chart of saved scale_clients.json files (runs of several sizes)",
    )
    args = parser.parse_args(argv)
    if args.chart_from:
        args.out.mkdir(parents=True, exist_ok=True)
        saved = [run for path in args.chart_from for run in _load_runs(path)]
        print_table(saved)
        print_ratios(saved)
        print(f"chart: {write_chart(saved, args.out / 'scale_clients.png')}")
        if any(len(run.stalled_by_mb) > 1 for run in saved):
            print(f"chart: {write_data_chart(saved, args.out / 'scale_clients_data.png')}")
        return 0
    # This process holds a descriptor per connection too.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runs: list[ClientsRun] = []
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="brook-bench-clients-") as tmp:
        for name in args.only or list(BROKER_NAMES):
            try:
                spec = brook_spec() if name == BROOK else SPECS[name]()
            except Exception as exc:
                print(f"{name}: cannot start: {exc}", file=sys.stderr)
                continue
            print(f"{name}: clients ...", file=sys.stderr, flush=True)
            runs.append(measure(spec, args, Path(tmp), args.out / "logs" / f"clients-{name}.log"))
    print_table(runs)
    print_ratios(runs)
    (args.out / "scale_clients.json").write_text(
        json.dumps([asdict(run) for run in runs], indent=2)
    )
    if len(args.stalled_mb) > 1:
        print(f"chart: {write_data_chart(runs, args.out / 'scale_clients_data.png')}")
    failed = any(
        run.error or any(p is not None and (p.error or p.failures) for p in
                         (run.connections, run.groups, run.producers, run.stalled))
        for run in runs
    )  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
