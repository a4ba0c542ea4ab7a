"""Charts as inline SVG, drawn in Python: the report needs no script library and no
network to show them.

Each function returns one `<svg>` element with a `data-chart` attribute naming it, a
`<title>` on every mark (the browser shows it on hover), and the palette below, so a
screenshot of the report shows these colours where the charts are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 880
FONT = "font-family:system-ui,sans-serif;font-size:12px"
AXIS = "#6b7280"
GRID = "#e5e7eb"
# Distinct, saturated colours (Tableau 10), the first for the largest series.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
OTHERS = "#9ca3af"
BAR = "#1f77b4"
DISORDER = "#d62728"
OUTCOME_COLOURS = {
    "committed": "#2ca02c",
    "aborted": "#d62728",
    "open": "#ff7f0e",
    "marker_without_data": "#9467bd",
}


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    colour: str
    values: Sequence[float]


def _svg(name: str, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" data-chart="{name}" role="img"'
        f' aria-label="{escape(label)}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
        f' height="{height}" style="{FONT}">' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", fill: str = "#111827") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'
    )


def nice_ceiling(value: float) -> float:
    """The axis maximum: 1, 2, 2.5 or 5 times a power of ten, at or above `value`."""
    if value <= 0:
        return 1.0
    power: float = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power


def compact_number(value: float) -> str:
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}" if value != int(value) else str(int(value))


def line_chart(
    name: str,
    series: Sequence[Series],
    x_labels: Sequence[str],
    y_label: str,
    label: str,
) -> str:
    """Lines over equal steps (time buckets); x_labels are shown at a few ticks."""
    left, right, top, bottom = 64, 180, 16, 40
    height = 320
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    steps = max(1, len(x_labels) - 1)
    top_value = nice_ceiling(max((max(s.values, default=0) for s in series), default=0))
    body = _grid(left, top, plot_w, plot_h, top_value, y_label)
    for n in _ticks(len(x_labels), 6):
        x = left + plot_w * n / steps
        body.append(_text(x, top + plot_h + 16, x_labels[n], "middle", AXIS))
    for number, line in enumerate(series):
        points = [
            (left + plot_w * i / steps, top + plot_h * (1 - value / top_value))
            for i, value in enumerate(line.values)
        ]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        body.append(
            f'<polyline fill="none" stroke="{line.colour}" stroke-width="2.5"'
            f' points="{path}"><title>{escape(line.label)}:'
            f" {compact_number(sum(line.values))} records</title></polyline>"
        )
        body.append(_legend(left + plot_w + 16, top + 8 + 18 * number, line.colour, line.label))
    return _svg(name, height, body, label)


def bar_chart(
    name: str,
    bars: Sequence[tuple[str, float, str]],
    value_text: Callable[[float], str],
    label: str,
    colour: str = BAR,
) -> str:
    """Horizontal bars: (label, value, hover text) each."""
    left, right, row = 200, 120, 22
    height = 24 + row * len(bars)
    plot_w = WIDTH - left - right
    top_value = nice_ceiling(max((value for _, value, _ in bars), default=0))
    body = []
    for number, (bar_label, value, hover) in enumerate(bars):
        y = 12 + row * number
        width = max(1.0, plot_w * value / top_value) if value > 0 else 0.0
        body.append(_text(left - 8, y + 13, _clip(bar_label), "end"))
        body.append(
            f'<rect x="{left}" y="{y + 2}" width="{width:.1f}" height="{row - 6}"'
            f' fill="{colour}"><title>{escape(hover)}</title></rect>'
        )
        body.append(_text(left + width + 6, y + 13, value_text(value), "start", AXIS))
    return _svg(name, height, body, label)


def stacked_bars(
    name: str,
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    colours: dict[str, str],
    label: str,
) -> str:
    """Horizontal bars split into parts: (label, [(part, value), ...]) each."""
    left, right, row = 200, 40, 22
    legend_height = 28
    height = legend_height + 12 + row * len(rows)
    plot_w = WIDTH - left - right
    top_value = nice_ceiling(max((sum(v for _, v in parts) for _, parts in rows), default=0))
    body = [
        _legend(left + 150 * number, 14, colour, part.replace("_", " "))
        for number, (part, colour) in enumerate(colours.items())
    ]
    for number, (row_label, parts) in enumerate(rows):
        y = legend_height + row * number
        body.append(_text(left - 8, y + 13, _clip(row_label), "end"))
        x = float(left)
        for part, value in parts:
            if value <= 0:
                continue
            width = max(1.0, plot_w * value / top_value)
            body.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{width:.1f}" height="{row - 6}"'
                f' fill="{colours[part]}"><title>{escape(row_label)}:'
                f" {compact_number(value)} {escape(part.replace('_', ' '))}</title></rect>"
            )
            x += width
        total = sum(v for _, v in parts)
        body.append(_text(x + 6, y + 13, compact_number(total), "start", AXIS))
    return _svg(name, height, body, label)


def column_chart(
    name: str, columns: Sequence[tuple[str, float]], colour: str, y_label: str, label: str
) -> str:
    """Vertical columns over labelled categories."""
    left, right, top, bottom = 64, 24, 16, 40
    height = 220
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    top_value = nice_ceiling(max((value for _, value in columns), default=0))
    body = _grid(left, top, plot_w, plot_h, top_value, y_label)
    slot = plot_w / max(1, len(columns))
    for number, (column_label, value) in enumerate(columns):
        x = left + slot * number
        bar_h = plot_h * value / top_value
        body.append(
            f'<rect x="{x + slot * 0.15:.1f}" y="{top + plot_h - bar_h:.1f}"'
            f' width="{slot * 0.7:.1f}" height="{bar_h:.1f}" fill="{colour}">'
            f"<title>{escape(column_label)}: {compact_number(value)}</title></rect>"
        )
        body.append(_text(x + slot / 2, top + plot_h + 16, column_label, "middle", AXIS))
    return _svg(name, height, body, label)


def _grid(
    left: int, top: int, width: int, height: int, top_value: float, y_label: str
) -> list[str]:
    body = []
    for n in range(5):
        y = top + height * n / 4
        value = top_value * (4 - n) / 4
        body.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + width}" y2="{y:.1f}" stroke="{GRID}" />'
        )
        body.append(_text(left - 6, y + 4, compact_number(value), "end", AXIS))
    body.append(
        f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}"'
        f' stroke="{AXIS}" />'
    )
    body.append(
        f'<text transform="translate(14,{top + height / 2:.1f}) rotate(-90)"'
        f' text-anchor="middle" fill="{AXIS}">{escape(y_label)}</text>'
    )
    return body


def _legend(x: float, y: float, colour: str, text: str) -> str:
    return f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="12" fill="{colour}" />' + _text(
        x + 18, y + 1, _clip(text, 22)
    )


def _ticks(count: int, wanted: int) -> list[int]:
    if count <= 1:
        return list(range(count))
    step = max(1, round((count - 1) / (wanted - 1)))
    ticks = list(range(0, count, step))
    if ticks[-1] != count - 1 and count - 1 - ticks[-1] >= step / 2:
        ticks.append(count - 1)
    return ticks


def _clip(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
