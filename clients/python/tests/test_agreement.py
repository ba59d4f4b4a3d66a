"""The agreement report on real judge/human data (HANNA, the demo's slice) against the
reference implementations, computed here from the same rows: scipy's Pearson, Spearman and
Kendall (tau-b), scikit-learn's Cohen and quadratic-weighted kappa, equal to 1e-9."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from judgecal import Client
from judgecal.frames import agreement_frames, upload_frame

HANNA = Path(__file__).resolve().parents[3] / "demo" / "hanna" / "anchors.csv"
# One judge whose scores sit on the people's grid (means of three 1-5 ratings), and one whose
# scores do not (77 distinct values): its kappas put each score at its nearest level.
CELLS = [("Beluga-13B", "relevance"), ("OrcaPlatypus", "relevance")]


def on_grid(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Each score at its nearest level, the lower on a tie (the service's rule)."""
    return levels[np.argmin(np.abs(x[:, None] - levels[None, :]), axis=1)]


@pytest.fixture(scope="module")
def hanna(server):
    rows = pd.read_csv(HANNA)
    rows = rows[[(j, r) in CELLS for j, r in zip(rows["judge"], rows["rubric"])]]
    with Client(server.url, server.key) as client:
        upload_frame(client, rows, progress=False)
        for judge, _ in CELLS:
            client.train(judge, "isotonic", progress=False, timeout=300)
    return rows


@pytest.mark.parametrize("cell", CELLS)
def test_the_figures_equal_scipy_and_sklearn_on_hanna(hanna, client, cell):
    judge, rubric = cell
    rows = hanna[(hanna["judge"] == judge) & (hanna["rubric"] == rubric)]
    x, y = rows["judge_score"].to_numpy(float), rows["reference_score"].to_numpy(float)
    report = client.agreement(judge, rubric, top=5)
    assert report.n == len(rows) and report.held_out == len(rows)
    levels = np.unique(y)
    assert report.levels == list(levels) and len(levels) == 13
    grid = on_grid(x, levels)
    # scikit-learn takes class labels, not fractional scores: each level's position.
    at, y_at = np.searchsorted(levels, grid), np.searchsorted(levels, y)
    expected = {
        "pearson": stats.pearsonr(x, y).statistic,
        "spearman": stats.spearmanr(x, y).statistic,
        "kendall": stats.kendalltau(x, y).statistic,
        "cohen_kappa": cohen_kappa_score(at, y_at),
        "quadratic_kappa": cohen_kappa_score(at, y_at, weights="quadratic"),
    }
    frames = agreement_frames(report)
    raw = frames["figures"].query("scores == 'raw'").set_index("figure")
    for name, value in expected.items():
        assert raw.loc[name, "value"] == pytest.approx(value, abs=1e-9), name
        assert raw.loc[name, "lo"] < value < raw.loc[name, "hi"], name
    # The confusion matrix is the crosstab of the same rows.
    crosstab = pd.crosstab(grid, y).reindex(index=levels, columns=levels, fill_value=0)
    assert (frames["confusion_raw"].to_numpy() == crosstab.to_numpy()).all()
    # The bias by system is each system's mean of judge - reference.
    by_group = (rows["judge_score"] - rows["reference_score"]).groupby(rows["group"]).mean()
    got = frames["by_group"].set_index("group")["raw"]
    assert list(got.index) == sorted(by_group.index)
    assert np.abs(got - by_group.loc[got.index]).max() < 1e-9
    # Corrected: over every held-out anchor (five folds); the five largest misses listed,
    # largest first.
    corrected = frames["figures"].query("scores == 'corrected'").set_index("figure")
    assert corrected.loc["pearson", "n"] == len(rows)
    misses = frames["disagreements"]["error"].abs().to_list()
    assert len(misses) == 5 and misses == sorted(misses, reverse=True)


def test_the_repeat_noise_is_the_pooled_within_item_variance_of_the_demo_rows(client):
    # The demo's ChatGPT rows carry its other HANNA prompt variants as repeats.
    rows = pd.read_csv(HANNA)
    rows = rows[(rows["judge"] == "ChatGPT") & (rows["rubric"] == "surprise")]
    upload_frame(client, rows, progress=False)
    client.train("ChatGPT", "isotonic", progress=False, timeout=300)
    report = client.agreement("ChatGPT", "surprise", top=0)
    items = [
        np.array([j] + [float(s) for s in str(r).split(";")])
        for j, r in zip(rows["judge_score"], rows["repeats"])
        if isinstance(r, str) and r
    ]
    squares = sum(((s - s.mean()) ** 2).sum() for s in items)
    dof = sum(len(s) - 1 for s in items)
    assert report.repeats.items == len(items)
    assert report.repeats.within.value == pytest.approx(squares / dof, abs=1e-9)
    frame = agreement_frames(report)["repeats"]
    assert list(frame["k"]) == [1, 2, 3, 5, 10]
    assert frame["residual_ratio"].iloc[0] == 1.0 and frame["residual_ratio"].is_monotonic_decreasing
