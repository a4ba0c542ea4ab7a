"""report.html: the audit for a person, in one self-contained file.

No external resource: the styles, the charts (inline SVG from charts.py) and a short
script are inside the file, so it opens offline, from a mail attachment or a CI
artifact. The script only sorts tables on a click, and records on <html> how many
charts it found drawn (`data-charts-drawn`) and on each chart where the page shows it
(`data-box`: x, y, width, height), which the tests read back from a headless browser.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

from . import charts
from .findings import ERROR, INFO, WARNING
from .internal_topics import INTERNAL_TOPICS
from .report import OUTCOMES, AuditData
from .stats import CODECS

MAX_ROWS = 1000  # rows of a table shown in the page (the Parquet files have them all)
MAX_BARS = 30
MAX_LINES = 8
SEVERITY_COLOURS = {ERROR: "#b91c1c", WARNING: "#b45309", INFO: "#1d4ed8"}

# The page is as wide as a 1280 px window allows (the tables' widest, the partitions, fits
# there); a narrower window scrolls each table on its own, not the page.
STYLE = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1232px;color:#111827;
 padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid
 #e5e7eb;padding-bottom:4px}
.muted{color:#6b7280}.banner{padding:12px 16px;border-radius:6px;font-weight:600;margin:16px 0}
.ok{background:#dcfce7;color:#14532d}.failed{background:#fee2e2;color:#7f1d1d}
.banner li{font-weight:400;margin:6px 0}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #e5e7eb;border-radius:6px;
 padding:8px 14px;min-width:120px}.card b{display:block;font-size:20px}
table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f9fafb;cursor:pointer}td.n{text-align:right;white-space:nowrap;
 font-variant-numeric:tabular-nums}td.nw{white-space:nowrap}td.fold{color:#6b7280}
.scroll{overflow-x:auto}.sev{font-weight:600}.chart{margin:12px 0 24px}
figcaption{color:#6b7280;font-size:13px}
"""

SCRIPT = """
(function () {
  var charts = document.querySelectorAll("svg[data-chart]");
  var drawn = 0;
  charts.forEach(function (svg) {
    var box = svg.getBBox();
    if (box.width > 0 && box.height > 0 && svg.querySelector("rect, polyline")) drawn += 1;
    var place = svg.getBoundingClientRect();
    svg.setAttribute("data-box", [place.left + window.scrollX, place.top + window.scrollY,
      place.width, place.height].map(Math.round).join(","));
  });
  document.documentElement.setAttribute("data-charts", String(charts.length));
  document.documentElement.setAttribute("data-charts-drawn", String(drawn));
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, column) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var down = th.getAttribute("data-order") !== "down";
        th.setAttribute("data-order", down ? "down" : "up");
        // A folded row spans the columns after its first: it has no cell there.
        function value(row) {
          var cell = row.cells[column];
          return cell ? cell.getAttribute("data-v") || cell.textContent : "";
        }
        rows.sort(function (a, b) {
          var x = value(a);
          var y = value(b);
          var nx = parseFloat(x), ny = parseFloat(y);
          var order = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
          return down ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
"""


def size_text(count: float | None) -> str:
    if count is None:
        return ""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def time_text(millis: Any) -> str:
    if millis is None:
        return ""
    if isinstance(millis, datetime):
        moment = millis if millis.tzinfo else millis.replace(tzinfo=UTC)
    else:
        moment = datetime.fromtimestamp(int(millis) / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def duration_text(millis: float | None) -> str:
    if not millis:
        return "0 ms"
    for limit, unit in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if millis >= limit:
            return f"{millis / limit:.3g} {unit}"
    return f"{millis:.0f} ms"


def _cell(value: Any, numeric: bool = False) -> str:
    if value is None:
        return "<td></td>"
    if numeric:
        return f'<td class="n" data-v="{value}">{value:,}</td>'
    return f"<td>{escape(str(value))}</td>"


def _table(headers: list[str], rows: list[list[str]], total: int | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(f"<tr>{''.join(row)}</tr>" for row in rows[:MAX_ROWS])
    note = ""
    shown = min(len(rows), MAX_ROWS)
    count = len(rows) if total is None else total
    if count > shown:
        note = f'<p class="muted">{shown:,} of {count:,} rows shown; the Parquet file has all.</p>'
    return (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>{note}"
    )


def _name(row: dict[str, Any]) -> str:
    return f"{row['topic']}-{row['partition']}"


# --- sections -----------------------------------------------------------------------


def _overview(summary: dict[str, Any]) -> str:
    totals = summary["totals"]
    cards = [
        ("topics", f"{totals['topics']:,}"),
        ("partitions", f"{totals['partitions']:,}"),
        ("segments", f"{totals['segments']:,}"),
        ("records", f"{totals['records']:,}"),
        ("batches", f"{totals['batches']:,}"),
        ("on disk", size_text(totals["size_on_disk"])),
        ("groups", f"{totals['groups']:,}"),
        ("transactional ids", f"{totals['transactional_ids']:,}"),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><b>{escape(v)}</b><span class="muted">{escape(k)}</span></div>'
            for k, v in cards
        )
        + "</div>"
    )


def _checks(summary: dict[str, Any]) -> str:
    rows = []
    for name, check in summary["checks"].items():
        colour = SEVERITY_COLOURS[check["severity"]] if check["count"] else "#6b7280"
        rows.append(
            [
                f"<td>{escape(check['category'])}</td>",
                f"<td><code>{escape(name)}</code></td>",
                f'<td class="sev" style="color:{colour}">{escape(check["severity"])}</td>',
                _cell(check["count"], numeric=True),
                f"<td>{escape(check['description'])}</td>",
            ]
        )
    return _table(["category", "check", "severity", "found", "what it means"], rows)


def _records_over_time(data: AuditData) -> str:
    span = data.time_range
    if span is None or not data.over_time:
        return '<p class="muted">No record has a timestamp.</p>'
    per: dict[str, list[float]] = {}
    for row in data.over_time:
        values = per.setdefault(_name(row), [0.0] * span.buckets)
        values[row["bucket"]] += row["count"]
    ranked = sorted(per.items(), key=lambda item: -sum(item[1]))
    series = [
        charts.Series(name, charts.PALETTE[n % len(charts.PALETTE)], values)
        for n, (name, values) in enumerate(ranked[:MAX_LINES])
    ]
    rest = ranked[MAX_LINES:]
    if rest:
        summed = [sum(values[i] for _, values in rest) for i in range(span.buckets)]
        series.append(charts.Series(f"{len(rest)} other partitions", charts.OTHERS, summed))
    long_span = span.end - span.start > 2 * 86_400_000
    pattern = "%Y-%m-%d" if long_span else "%m-%d %H:%M:%S"
    labels = [
        datetime.fromtimestamp((span.start + n * span.width) / 1000, UTC).strftime(pattern)
        for n in range(span.buckets)
    ]
    svg = charts.line_chart(
        "records-over-time",
        series,
        labels,
        f"records per {duration_text(span.width)}",
        "Records over time per partition",
    )
    caption = (
        f"{time_text(span.start)} to {time_text(span.end)} in {span.buckets} buckets of"
        f" {duration_text(span.width)} (UTC), record timestamps."
    )
    return f'<figure class="chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def _disorder(data: AuditData, partitions: list[dict[str, Any]]) -> str:
    going_back = [r for r in partitions if r["timestamp_regressions"]]
    if not going_back:
        return '<p class="muted">No timestamp goes back: every partition is in time order.</p>'
    going_back.sort(key=lambda r: -r["timestamp_regressions"] / max(1, r["records"]))
    bars = [
        (
            _name(r),
            100.0 * r["timestamp_regressions"] / max(1, r["records"]),
            f"{r['timestamp_regressions']:,} of {r['records']:,} records go back, by up to"
            f" {duration_text(r['max_regression_ms'])}",
        )
        for r in going_back[:MAX_BARS]
    ]
    by_share = charts.bar_chart(
        "timestamp-disorder",
        bars,
        lambda v: f"{v:.2g}%",
        "Share of records below the running maximum timestamp",
        colour=charts.DISORDER,
    )
    decades: dict[int, int] = {}
    for row in data.regression_decades:
        decades[row["decade"]] = decades.get(row["decade"], 0) + row["count"]
    columns = [
        (f"{duration_text(10**decade)}-{duration_text(10 ** (decade + 1))}", float(count))
        for decade, count in sorted(decades.items())
    ]
    by_size = charts.column_chart(
        "regression-sizes", columns, charts.DISORDER, "records", "How far timestamps go back"
    )
    worst = max(going_back, key=lambda r: r["max_regression_ms"] or 0)
    return (
        f'<figure class="chart">{by_share}<figcaption>Share of each partition\'s records whose'
        " timestamp is below the largest timestamp before it (hover for counts).</figcaption>"
        f'</figure><figure class="chart">{by_size}<figcaption>How far back they go, by order of'
        f" magnitude; the largest: {escape(duration_text(worst['max_regression_ms']))} in"
        f" {escape(_name(worst))}.</figcaption></figure>"
    )


def _sizes(partitions: list[dict[str, Any]]) -> str:
    sized = sorted((r for r in partitions if r["size_on_disk"]), key=lambda r: -r["size_on_disk"])
    if not sized:
        return '<p class="muted">Every partition is empty.</p>'
    bars = [
        (
            _name(r),
            float(r["size_on_disk"]),
            f"{size_text(r['size_on_disk'])} in {r['segments']} segments, {r['records']:,} records",
        )
        for r in sized[:MAX_BARS]
    ]
    svg = charts.bar_chart("partition-sizes", bars, size_text, "Partition sizes")
    note = f" ({len(sized) - MAX_BARS} smaller ones not shown)" if len(sized) > MAX_BARS else ""
    return (
        f'<figure class="chart">{svg}<figcaption>Bytes of the .log files per partition'
        f"{escape(note)}.</figcaption></figure>"
    )


def _outcomes(partitions: list[dict[str, Any]]) -> str:
    columns = [
        f"txn_{o}" if o != "marker_without_data" else "txn_markers_without_data" for o in OUTCOMES
    ]
    with_txns = [r for r in partitions if any(r[c] for c in columns)]
    if not with_txns:
        return '<p class="muted">No transaction in these partitions.</p>'
    with_txns.sort(key=lambda r: -sum(r[c] for c in columns))
    rows = [
        (_name(r), [(o, float(r[c])) for o, c in zip(OUTCOMES, columns, strict=True)])
        for r in with_txns[:MAX_BARS]
    ]
    svg = charts.stacked_bars(
        "transaction-outcomes", rows, charts.OUTCOME_COLOURS, "Transaction outcomes"
    )
    return (
        f'<figure class="chart">{svg}<figcaption>Transactions per partition by how they'
        " ended: a COMMIT marker, an ABORT marker, no marker yet (open), or a marker with"
        " no data before it.</figcaption></figure>"
    )


def _findings(table: pa.Table, total: int) -> str:
    if table.num_rows == 0:
        return "<p>Nothing found.</p>"
    rows = []
    for f in table.slice(0, MAX_ROWS).to_pylist():
        colour = SEVERITY_COLOURS[f["severity"]]
        rows.append(
            [
                f'<td class="sev" style="color:{colour}">{escape(f["severity"])}</td>',
                f"<td><code>{escape(f['check'])}</code></td>",
                f"<td>{escape(_name(f))}</td>",
                _cell(f["segment"], numeric=True),
                _cell(f["offset"], numeric=True),
                _cell(f["producer_id"], numeric=True),
                f"<td>{escape(f['message'])}</td>",
            ]
        )
    return _table(
        ["severity", "check", "partition", "segment", "offset", "producer", "message"],
        rows,
        total,
    )


def _ranges(numbers: list[int]) -> str:
    """0-3, 7, 9-12"""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _is_empty_internal(row: dict[str, Any]) -> bool:
    """A partition of __consumer_offsets or __transaction_state with nothing in it and
    nothing found: a broker creates 50 of each, most of them empty."""
    return (
        row["topic"] in INTERNAL_TOPICS
        and not row["records"]
        and not row["integrity_findings"]
        and not row["semantics_findings"]
    )


def _partitions(partitions: list[dict[str, Any]]) -> str:
    rows = []
    folded: dict[str, list[int]] = {}
    for r in partitions:
        if _is_empty_internal(r):
            folded.setdefault(r["topic"], []).append(r["partition"])
    headers = [
        "partition",
        "records",
        "size",
        "batches",
        "offsets",
        "timestamps (UTC)",
        "compression (records)",
        "distinct keys",
        "shadowed",
        "ts regressions",
        "integrity / semantics findings",
    ]
    for topic, numbers in sorted(folded.items()):
        label = "partition" if len(numbers) == 1 else "partitions"
        rows.append(
            [
                f'<td class="nw">{escape(topic)}</td>',
                f'<td class="fold" colspan="{len(headers) - 1}">{len(numbers)} empty'
                f" {label}: {escape(_ranges(numbers))}</td>",
            ]
        )
    for r in partitions:
        if r["topic"] in folded and r["partition"] in folded[r["topic"]]:
            continue
        codecs = ", ".join(
            f"{codec} {r[f'records_{codec}']:,}" for codec in CODECS if r.get(f"records_{codec}")
        )
        rows.append(
            [
                f'<td class="nw">{escape(_name(r))}</td>',
                _cell(r["records"], numeric=True),
                f'<td class="n" data-v="{r["size_on_disk"]}">{size_text(r["size_on_disk"])}</td>',
                _cell(r["batches"], numeric=True),
                f'<td class="nw">{"" if r["first_offset"] is None else r["first_offset"]}'
                f"-{'' if r['last_offset'] is None else r['last_offset']}</td>",
                f'<td class="nw">{escape(time_text(r["first_timestamp"]))}<br>'
                f"{escape(time_text(r['last_timestamp']))}</td>",
                f"<td>{escape(codecs)}</td>",
                _cell(r["distinct_keys"], numeric=True),
                f'<td class="n" data-v="{r["shadowed_share"]:.4f}">'
                f"{100 * r['shadowed_share']:.1f}%</td>",
                _cell(r["timestamp_regressions"], numeric=True),
                f'<td class="n" data-v="{r["integrity_findings"]}">'
                f"{r['integrity_findings']:,} / {r['semantics_findings']:,}</td>",
            ]
        )
    return _table(headers, rows)


def _coordinators(tables: dict[str, pa.Table]) -> str:
    groups = tables["groups"].to_pylist()
    offsets = tables["consumer_offsets"].to_pylist()
    states = tables["transaction_state"].to_pylist()
    parts = ["<h3>Consumer groups</h3>"]
    if groups:
        parts.append(
            _table(
                ["group", "protocol type", "generation", "protocol", "leader", "members"],
                [
                    [
                        f"<td>{escape(g['group'])}</td>",
                        f"<td>{escape(g['protocol_type'] or '')}</td>",
                        _cell(g["generation"], numeric=True),
                        f"<td>{escape(g['protocol'] or '')}</td>",
                        f"<td>{escape(g['leader'] or '')}</td>",
                        _cell(g["members"], numeric=True),
                    ]
                    for g in sorted(groups, key=lambda g: g["group"])
                ],
            )
        )
    else:
        parts.append('<p class="muted">No group metadata in __consumer_offsets.</p>')
    parts.append("<h3>Committed offsets</h3>")
    if offsets:
        parts.append(
            _table(
                ["group", "topic", "partition", "offset", "committed at", "pending txn of"],
                [
                    [
                        f"<td>{escape(o['group'])}</td>",
                        f"<td>{escape(o['topic'])}</td>",
                        _cell(o["partition"], numeric=True),
                        _cell(o["committed_offset"], numeric=True),
                        f"<td>{escape(time_text(o['commit_timestamp']))}</td>",
                        _cell(o["pending_producer_id"], numeric=True),
                    ]
                    for o in sorted(offsets, key=lambda o: (o["group"], o["topic"], o["partition"]))
                ],
            )
        )
    else:
        parts.append('<p class="muted">No committed offset in __consumer_offsets.</p>')
    parts.append("<h3>Transactional ids</h3>")
    if states:
        parts.append(
            _table(
                ["transactional id", "producer id", "epoch", "state", "timeout", "partitions"],
                [
                    [
                        f"<td>{escape(s['transactional_id'])}</td>",
                        _cell(s["producer_id"], numeric=True),
                        _cell(s["producer_epoch"], numeric=True),
                        f"<td>{escape(s['status'])}</td>",
                        f"<td>{escape(duration_text(s['timeout_ms']))}</td>",
                        f"<td>{escape(', '.join(s['partitions']))}</td>",
                    ]
                    for s in sorted(states, key=lambda s: s["transactional_id"])
                ],
            )
        )
    else:
        parts.append('<p class="muted">No transactional id in __transaction_state.</p>')
    return "".join(parts)


def _banner(summary: dict[str, Any]) -> str:
    """Green, or red with each failing check: how often, where, and what to do."""
    failed = summary["failed_checks"]
    if not failed:
        return (
            '<div class="banner ok">Passed: no check found damaged or lost data'
            " (exit status 0).</div>"
        )
    items = []
    for entry in failed:
        partitions = entry["partitions"]
        where = ", ".join(partitions[:5]) + (
            f" and {len(partitions) - 5} more" if len(partitions) > 5 else ""
        )
        first = f"<br>First: {escape(entry['first'])}" if entry["first"] else ""
        items.append(
            f"<li><code>{escape(entry['check'])}</code>: {entry['count']:,} in"
            f" {escape(where)}.{first}<br>What to do: {escape(entry['advice'])}</li>"
        )
    names = ", ".join(entry["check"] for entry in failed)
    return (
        f'<div class="banner failed">Failed (exit status 1): {escape(names)}.'
        f"<ul>{''.join(items)}</ul>The findings below give every place.</div>"
    )


def render(data: AuditData, summary: dict[str, Any], tables: dict[str, pa.Table]) -> str:
    partitions = tables["partitions"].to_pylist()
    banner = _banner(summary)
    severities = summary["findings_by_severity"]
    counts = ", ".join(f"{s} {n:,}" for s, n in severities.items())
    spark = data.spark
    total_findings = sum(severities.values())
    body = [
        f"<h1>Brook audit of {escape(data.options.log_dir)}</h1>",
        f'<p class="muted">{escape(summary["generated_at"])} · Spark'
        f" {escape(spark.get('version', ''))}"
        f" on {escape(spark.get('master', ''))} · {summary['elapsed_seconds']:.1f} s</p>",
        banner,
        f"<p>Findings by severity: {escape(counts)}.</p>",
        _overview(summary),
        '<h2 id="records-over-time">Records over time</h2>',
        _records_over_time(data),
        '<h2 id="timestamp-disorder">Timestamp disorder</h2>',
        _disorder(data, partitions),
        '<h2 id="partition-sizes">Partition sizes</h2>',
        _sizes(partitions),
        '<h2 id="transaction-outcomes">Transaction outcomes</h2>',
        _outcomes(partitions),
        '<h2 id="checks">Checks</h2>',
        _checks(summary),
        '<h2 id="findings">Findings</h2>',
        _findings(tables["findings"], total_findings),
        '<h2 id="partitions">Partitions</h2>',
        _partitions(partitions),
        '<h2 id="coordinators">__consumer_offsets and __transaction_state</h2>',
        _coordinators(tables),
        f'<p class="muted">Files: {escape(", ".join(summary["files"]))}.</p>',
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Brook audit: {escape(data.options.log_dir)}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
