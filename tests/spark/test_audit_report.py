"""report.html as a person sees it: opened in headless Chromium (Debian's package, which
./test.sh installs), its script runs without an error, every chart is drawn, and a
screenshot shows each chart's colours inside that chart's place on the page."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from brook.spark.audit import charts

# A broker writing the log, a Spark job (or a cluster's JVMs) in one test's setup: on
# a loaded 2-core machine that can pass pytest's 300 s default.
pytestmark = pytest.mark.timeout(900)

WINDOW = (1000, 2600)
# The colours each chart of the full report must show (see charts.py).
CHART_COLOURS = {
    "records-over-time": [charts.PALETTE[0]],
    "timestamp-disorder": [charts.DISORDER],
    "regression-sizes": [charts.DISORDER],
    "partition-sizes": [charts.BAR],
    "transaction-outcomes": [
        charts.OUTCOME_COLOURS["committed"],
        charts.OUTCOME_COLOURS["aborted"],
        charts.OUTCOME_COLOURS["open"],
    ],
}
ALL_COLOURS = {colour for colours in CHART_COLOURS.values() for colour in colours}


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed: ./test.sh installs Debian's chromium package")
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",  # tests may run as root
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def pixels_of(image: Image.Image, box: tuple[int, int, int, int], colour: str) -> int:
    """How many pixels inside `box` (left, top, right, bottom) are `colour`, give or take
    the anti-aliasing at the edges of a mark."""
    want = rgb(colour)
    region = image.crop(box).convert("RGB")
    return sum(
        count
        for count, pixel in region.getcolors(region.width * region.height) or []
        if all(abs(a - b) <= 12 for a, b in zip(pixel, want, strict=True))
    )


def test_the_report_renders_its_charts_in_chromium(full_report, tmp_path):
    _, out = full_report
    page = (out / "report.html").resolve().as_uri()
    html = (out / "report.html").read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<link" not in html  # nothing fetched: self-contained

    dumped = chromium(tmp_path / "profile", "--enable-logging=stderr", "--v=0", "--dump-dom", page)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    # The page's script ran to its end (it sets these) and logged no error.
    assert re.search(r'data-charts-drawn="(\d+)"', dumped.stdout), dumped.stdout[:500]
    drawn = int(re.search(r'data-charts-drawn="(\d+)"', dumped.stdout).group(1))
    total = int(re.search(r'data-charts="(\d+)"', dumped.stdout).group(1))
    assert drawn == total == len(CHART_COLOURS)
    console = [line for line in dumped.stderr.splitlines() if "CONSOLE" in line]
    assert console == [] and "Uncaught" not in dumped.stderr

    boxes = {}
    for tag in re.findall(r"<svg[^>]*>", dumped.stdout):
        name = re.search(r'data-chart="([^"]+)"', tag).group(1)
        x, y, width, height = map(int, re.search(r'data-box="([^"]+)"', tag).group(1).split(","))
        boxes[name] = (x, y, x + width, y + height)
    assert set(boxes) == set(CHART_COLOURS)
    assert max(box[3] for box in boxes.values()) <= WINDOW[1], "every chart in the screenshot"

    shot = tmp_path / "report.png"
    taken = chromium(tmp_path / "profile", f"--screenshot={shot}", page)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    image = Image.open(shot)
    assert image.size == WINDOW
    for name, colours in CHART_COLOURS.items():
        for colour in colours:
            assert pixels_of(image, boxes[name], colour) >= 30, (name, colour)
    # Above the first chart (the title, the banner, the figures) none of them shows.
    first_top = min(box[1] for box in boxes.values())
    header = (0, 0, WINDOW[0], first_top - 40)
    for colour in ALL_COLOURS:
        assert pixels_of(image, header, colour) == 0, colour


# Measures the page once it is laid out: how many tables are wider than their box (and
# so scrolled sideways, their last columns out of sight), and the page's own width.
MEASURE = """<script>
var cut = 0;
document.querySelectorAll("table").forEach(function (table) {
  var box = table.parentElement;
  if (table.getBoundingClientRect().right > box.getBoundingClientRect().right + 1) cut += 1;
});
document.documentElement.setAttribute("data-cut", String(cut));
document.documentElement.setAttribute("data-page-width",
  String(document.documentElement.scrollWidth));
</script>"""


def test_empty_internal_partitions_are_one_line_and_the_tables_fit_1280_px(full_report, tmp_path):
    _, out = full_report
    rows = pq.read_table(out / "partitions.parquet").to_pylist()
    empty = [
        r["partition"] for r in rows if r["topic"] == "__consumer_offsets" and not r["records"]
    ]
    assert len(empty) >= 48  # every partition is in the Parquet file
    html = (out / "report.html").read_text()
    section = html[html.index('id="partitions"') : html.index('id="coordinators"')]
    assert f"{len(empty)} empty partitions" in section
    for number in empty:
        assert f">__consumer_offsets-{number}<" not in section
    assert section.count("<tr>") == len(rows) - len(empty) + 2  # the header, the fold

    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", MEASURE + "</body>"))
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "chromium is not installed: ./test.sh installs Debian's chromium package"
    dumped = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1280,2000",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            measured.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert re.search(r'data-cut="(\d+)"', dumped.stdout).group(1) == "0"
    assert int(re.search(r'data-page-width="(\d+)"', dumped.stdout).group(1)) <= 1280
