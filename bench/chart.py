"""The PNG: one group of bars per metric, the reference at 1.0 and Brook as its ratio to it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# matplotlib (typed) comes with the bench extra, absent where the tests' mypy runs.
import matplotlib  # type: ignore[import-not-found, unused-ignore]

# Agg renders to files only: no display is needed, which CI machines and containers lack.
matplotlib.use("Agg")

# After use(): the backend is fixed when pyplot loads.
import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]
from matplotlib.ticker import FuncFormatter  # type: ignore[import-not-found, unused-ignore]

from bench.brokers import BROKER_NAMES, BROOK, KAFKA, REFERENCE
from bench.metrics import METRICS, BrokerResult, Metric
from bench.report import format_ratio, ratio

COLORS = {REFERENCE: "#9e9e9e", BROOK: "#1f77b4", KAFKA: "#d62728"}
# Ratios of a Python broker to a Rust one can span orders of magnitude; past this spread a linear
# axis would flatten the small bars to nothing, so the axis turns logarithmic.
LOG_SCALE_SPREAD = 10.0


def _label(metric: Metric) -> str:
    arrow = "\u2191" if metric.better == "higher" else "\u2193"
    return f"{metric.label}\n{metric.unit} {arrow}"


def _bar_value(metric: Metric, name: str, results: dict[str, BrokerResult]) -> float | None:
    result = results.get(name)
    if result is None or result.value(metric) is None:
        return None
    if name == REFERENCE:
        return 1.0
    return ratio(metric, results, REFERENCE, name)


def write_chart(results: dict[str, BrokerResult], title: str, path: Path) -> Path:
    names = [REFERENCE, BROOK, KAFKA]
    # MB/s gives the same ratios as msgs/s (a phase's values have one size): one bar each.
    metrics = [m for m in METRICS if m.unit != "MB/s"]
    width = 0.27
    fig, ax = plt.subplots(figsize=(16, 7), layout="constrained")
    values = {name: [_bar_value(m, name, results) for m in metrics] for name in names}
    present = [v for series in values.values() for v in series if v]
    top = max(present, default=1.0)
    if present and top / min(present) > LOG_SCALE_SPREAD:
        ax.set_yscale("log")
        # Room above the tallest bar for its vertical value label.
        ax.set_ylim(min(present) / 2, top * 4)
        # Plain numbers (0.1, 1, 10) read better as ratios than powers of ten.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    else:
        ax.set_ylim(0, top * 1.3)
    for offset, name in zip((-width, 0.0, width), names, strict=True):
        xs = [i + offset for i in range(len(metrics))]
        heights = [v if v else 0.0 for v in values[name]]
        bars = ax.bar(xs, heights, width, label=name, color=COLORS[name])
        for bar, value, metric in zip(bars, values[name], metrics, strict=True):
            x = bar.get_x() + bar.get_width() / 2
            if value:
                coords: str | tuple[str, str] = "data"
                text, xy = format_ratio(value).rstrip("x"), (x, value)
            else:
                # No bar to sit on: write the reason from the bottom of the axes up.
                text, xy = _missing(metric, results.get(name)), (x, 0.01)
                coords = ("data", "axes fraction")
            ax.annotate(
                text,
                xy,
                xycoords=coords,
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90,
            )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(
        range(len(metrics)),
        [_label(m) for m in metrics],
        fontsize=7,
        rotation=45,
        ha="right",
        rotation_mode="anchor",
    )
    ax.set_ylabel("relative to reference (reference = 1.0)")
    ax.set_title(f"{title}\n\u2191 higher is better, \u2193 lower is better", fontsize=10)
    ax.legend(loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _missing(metric: Metric, result: BrokerResult | None) -> str:
    if result is None:
        return "not run"
    return "failed" if result.failure(metric) else "n/a"


@dataclass(frozen=True)
class GrowthPanel:
    """One panel of a growth chart: each broker's (x, y) points, x drawn on a log scale."""

    title: str
    xlabel: str
    points: dict[str, list[tuple[float, float]]]
    ylabel: str = ""


def write_growth_chart(panels: list[GrowthPanel], title: str, path: Path) -> Path:
    """Panels side by side, one line per broker: how a cost grows with the work."""
    fig, axes = plt.subplots(1, len(panels), figsize=(18, 4.5), layout="constrained")
    for ax, panel in zip(axes, panels, strict=True):
        for broker in BROKER_NAMES:
            points = sorted(panel.points.get(broker, []))
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=broker, color=COLORS[broker])
        ax.set_xscale("log")
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
