"""The comparison table: one row per metric, every broker, and Brook's ratio to the reference
(Tansu) and to Apache Kafka."""

from __future__ import annotations

from collections.abc import Iterable

from bench.brokers import BROOK, KAFKA, REFERENCE
from bench.metrics import METRICS, BrokerResult, Metric

FAILED = "FAILED"
NOT_RUN = "-"


def ratio(
    metric: Metric, results: dict[str, BrokerResult], other: str = REFERENCE, name: str = BROOK
) -> float | None:
    """`name`'s value over `other`'s (Brook / reference by default), or None when either
    side has no number."""
    brook, ref = results.get(name), results.get(other)
    if brook is None or ref is None:
        return None
    mine, theirs = brook.value(metric), ref.value(metric)
    if mine is None or theirs is None or theirs == 0:
        return None
    return mine / theirs


def cell(metric: Metric, result: BrokerResult | None) -> str:
    if result is None:
        return NOT_RUN
    value = result.value(metric)
    if value is None:
        return FAILED if result.failure(metric) else NOT_RUN
    return format_value(value)


def format_value(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_ratio(value: float) -> str:
    # Two decimals would print a 130-fold difference as "0.01x"; keep three significant digits.
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.3g}x"


def ratio_parts(figures: Iterable[tuple[str, float | None, float | None]]) -> list[str]:
    """ "label 1.23x" for each (label, Brook's figure, the peer's) that both sides have."""
    return [
        f"{label} {format_ratio(mine / theirs)}"
        for label, mine, theirs in figures
        if mine is not None and theirs
    ]


def rows(results: dict[str, BrokerResult]) -> list[list[str]]:
    table = []
    for metric in METRICS:
        r = ratio(metric, results)
        table.append(
            [
                metric.label,
                metric.unit,
                cell(metric, results.get(BROOK)),
                cell(metric, results.get(REFERENCE)),
                cell(metric, results.get(KAFKA)),
                format_ratio(r) if r is not None else NOT_RUN,
                format_ratio(k) if (k := ratio(metric, results, KAFKA)) is not None else NOT_RUN,
                f"{metric.better} is better",
            ]
        )
    return table


HEADER = ["metric", "unit", "brook", "reference", "kafka", "ratio b/r", "ratio b/k", "better"]
# Numbers read best right-aligned; words left-aligned.
RIGHT_ALIGNED = {2, 3, 4, 5, 6}


def render_table(table: Iterable[list[str]]) -> str:
    body = [HEADER, *table]
    widths = [max(len(row[i]) for row in body) for i in range(len(HEADER))]

    def line(row: list[str]) -> str:
        cells = [
            value.rjust(widths[i]) if i in RIGHT_ALIGNED else value.ljust(widths[i])
            for i, value in enumerate(row)
        ]
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(HEADER), rule, *(line(row) for row in body[1:])])


def render_failures(results: dict[str, BrokerResult]) -> str:
    """One entry per distinct reason: a broker that never started fails every phase alike."""
    lines = []
    for result in results.values():
        by_reason: dict[str, list[str]] = {}
        for phase, reason in result.failures.items():
            by_reason.setdefault(reason, []).append(phase)
        for reason, phases in by_reason.items():
            first, *rest = reason.splitlines() or [""]
            lines.append(f"- {result.name} / {', '.join(phases)}: {first}")
            lines.extend(f"    {extra}" for extra in rest)
    return "\n".join(lines)


def render_report(results: dict[str, BrokerResult], heading: str) -> str:
    parts = [heading, "", render_table(rows(results))]
    failures = render_failures(results)
    if failures:
        parts += ["", "Failed phases:", failures]
    return "\n".join(parts)
