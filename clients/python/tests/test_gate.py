"""`judgecal-py gate` against a real judgecal, on runs with known answers: anchors follow
y = 0.5 + 0.8·j, so a run scored 4 everywhere reads about 3.7 and one scored 2 about 2.1; two
runs of the same scores differ by exactly 0. The Action and the docs' example workflow are
checked against GitHub's schemas (check-jsonschema's vendored copies)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judgecal import Client
from judgecal.cli import main

from test_client import anchors

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cell(server):
    with Client(server.url, server.key) as jc:
        assert jc.upload_anchors("j1", "gate", anchors(300, 7, "g")).inserted == 300
        versions = jc.train("j1", "quantile_map", rubrics=["gate"], progress=False, timeout=120)
        assert versions[0].active
    return server


def run(tmp_path: Path, name: str, scores: list[float]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(json.dumps({"item_id": f"{name}{i}", "judge_score": s}) for i, s in enumerate(scores)))
    return str(path)


def gate(cell, monkeypatch, capsys, tmp_path, *args: str) -> tuple[int, dict, str]:
    monkeypatch.setenv("JUDGECAL_API_KEY", cell.key)
    report = tmp_path / "report.json"
    with pytest.raises(SystemExit) as e:
        main(["--url", cell.url, "gate", *args, "--judge", "j1", "--rubric", "gate", "--report", str(report)])
    out = capsys.readouterr()
    return e.value.code, (json.loads(report.read_text()) if report.exists() else {}), out.out + out.err


def test_a_run_against_a_baseline_is_better_worse_or_undecided(cell, monkeypatch, capsys, tmp_path):
    high, low = run(tmp_path, "high", [4.0] * 40), run(tmp_path, "low", [2.0] * 40)
    spread = [1.0 + 4.0 * i / 39 for i in range(40)]
    same_a, same_b = run(tmp_path, "sa", spread), run(tmp_path, "sb", spread)
    code, report, out = gate(cell, monkeypatch, capsys, tmp_path, high, "--baseline", low)
    assert code == 0 and report["verdict"] == "better", out
    assert report["mode"] == "compare" and report["interval"][0] > 0
    assert 1.2 < report["value"] < 2.0, report  # 0.8 · (4 − 2), as the anchors' line says
    assert "| difference |" in out and "**better** (exit 0" in out
    code, report, _ = gate(cell, monkeypatch, capsys, tmp_path, low, "--baseline", high)
    assert (code, report["verdict"]) == (1, "worse")
    code, report, _ = gate(cell, monkeypatch, capsys, tmp_path, high, "--baseline", low, "--lower-is-better")
    assert (code, report["verdict"], report["higher_is_better"]) == (1, "worse", False)
    code, report, _ = gate(cell, monkeypatch, capsys, tmp_path, same_a, "--baseline", same_b)
    assert (code, report["verdict"]) == (2, "undecided"), report
    lo, hi = report["interval"]
    assert lo <= 0 <= hi and abs(report["value"]) < 1e-9


def test_a_run_against_a_threshold_passes_fails_or_is_undecided(cell, monkeypatch, capsys, tmp_path):
    high = run(tmp_path, "high", [4.0] * 40)
    outputs = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    code, report, out = gate(cell, monkeypatch, capsys, tmp_path, high, "--threshold", "3.0")
    assert (code, report["verdict"], report["mode"]) == (0, "pass", "threshold"), out
    assert "verdict=pass" in outputs.read_text()
    estimate = report["value"]
    assert 3.3 < estimate < 4.1, report  # 0.5 + 0.8 · 4 = 3.7
    code, report, _ = gate(cell, monkeypatch, capsys, tmp_path, high, "--threshold", "4.6")
    assert (code, report["verdict"]) == (1, "fail")
    # The threshold at the run's own estimate: its interval holds it.
    code, report, _ = gate(cell, monkeypatch, capsys, tmp_path, high, "--threshold", str(estimate))
    assert (code, report["verdict"]) == (2, "undecided")


def test_a_gate_that_cannot_ask_exits_3_and_decides_nothing(cell, monkeypatch, capsys, tmp_path):
    high = run(tmp_path, "high", [4.0] * 10)
    code, report, out = gate(cell, monkeypatch, capsys, tmp_path, high)
    assert code == 3 and report == {} and "--baseline or --threshold" in out
    monkeypatch.setenv("JUDGECAL_API_KEY", cell.key)
    report_path = tmp_path / "report.json"
    with pytest.raises(SystemExit) as e:
        main(["--url", cell.url, "gate", high, "--threshold", "3", "--judge", "nobody", "--rubric", "gate", "--report", str(report_path)])
    assert e.value.code == 3 and not report_path.exists()
    assert "judgecal-py gate:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("schema", "path"),
    [("vendor.github-actions", ROOT / "action.yml"), ("vendor.github-workflows", ROOT / "docs" / "examples" / "gate-workflow.yml")],
)
def test_the_action_and_the_example_workflow_validate(schema, path):
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
