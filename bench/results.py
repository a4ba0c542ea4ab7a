"""The JSON of raw numbers written beside the chart, for later comparison between runs."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.brokers import KAFKA
from bench.metrics import METRICS, BrokerResult
from bench.report import ratio


def to_json(
    results: dict[str, BrokerResult], machine: dict[str, object], settings: dict[str, object]
) -> dict[str, object]:
    return {
        "machine": machine,
        "settings": settings,
        "metrics": [
            {
                "key": m.key,
                "label": m.label,
                "unit": m.unit,
                "better": m.better,
                "values": {name: r.value(m) for name, r in results.items()},
                "ratio_brook_over_reference": ratio(m, results),
                "ratio_brook_over_kafka": ratio(m, results, KAFKA),
            }
            for m in METRICS
        ],
        "brokers": {name: asdict(r) for name, r in results.items()},
    }


def write_json(document: dict[str, object], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path
