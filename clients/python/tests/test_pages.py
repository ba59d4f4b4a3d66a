"""The report pages in a real browser: headless Chromium (Debian's `chromium` package) loads
`/ui/` and a cell's page from a real server holding a HANNA cell, with no console error and no
failed request, and the page shows the numbers the API gives for the same cell. Screenshots
go to `$JUDGECAL_SCREENSHOTS` where set (docs/figures holds the committed ones)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import start
from judgecal import Client
from judgecal.frames import upload_frame

HANNA = Path(__file__).resolve().parents[3] / "demo" / "hanna" / "anchors.csv"
JUDGE, RUBRIC = "ChatGPT", "coherence"


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    pytest.fail("the page tests need Chromium: apt-get install chromium (scripts/python-client does)")


def browse(url: str, work: Path, screenshot: Path | None = None) -> tuple[str, str]:
    """The page's DOM after load, and what the browser logged (console messages included)."""
    args = [
        chromium(),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={work / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1366,900",
    ]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    done = subprocess.run(args + [url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("pages")
    server = start("sqlite", work, auth__disabled="true")
    rows = pd.read_csv(HANNA)
    rows = rows[(rows["judge"] == JUDGE) & (rows["rubric"] == RUBRIC)]
    with Client(server.url, server.key) as client:
        upload_frame(client, rows, progress=False)
        client.train(JUDGE, "bayes", progress=False, timeout=600)
        report = client.agreement(JUDGE, RUBRIC)
    yield server, report, work
    server.process.terminate()
    server.process.wait(timeout=10)


def text(dom: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def figure(f) -> str:
    return f"{f.value:.3f} [{f.interval[0]:.3f}, {f.interval[1]:.3f}]"


@pytest.mark.parametrize("path", ["/ui/", f"/ui/cells/{JUDGE}/{RUBRIC}"])
def test_a_page_loads_without_errors_and_shows_the_apis_numbers(site, path):
    server, report, work = site
    dom, log = browse(server.url + path, work)
    problems = [line for line in log.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    assert problems == [], problems
    assert "</html>" in dom and "<script" not in dom
    shown = text(dom)
    if path == "/ui/":
        assert f"{JUDGE} / {RUBRIC}" in shown and "bayes" in shown
        return
    for side in (report.raw, report.corrected):
        for f in (side.pearson, side.spearman, side.kendall):
            assert figure(f) in shown, figure(f)
    assert figure(report.raw.kappa.quadratic) in shown
    for g in report.by_group:
        assert figure(g.bias.corrected) in shown, g.group
    assert report.disagreements[0].item_id in shown
    # The demo's ChatGPT rows carry repeats: the page shows the judge's repeat noise.
    assert figure(report.repeats.within) in shown
    assert "<svg" in dom


def test_screenshots(site):
    server, _, work = site
    out = Path(os.environ.get("JUDGECAL_SCREENSHOTS", work))
    for name, path in [("ui-index.png", "/ui/"), ("ui-cell.png", f"/ui/cells/{JUDGE}/{RUBRIC}")]:
        browse(server.url + path, work, out / name)
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, name
