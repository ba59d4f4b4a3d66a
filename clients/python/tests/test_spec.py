"""The client's models cannot drift from the server: they are regenerated from openapi.yaml
here and must equal the committed file (run scripts/generate_models.py after changing the
spec), and every endpoint of the spec has a client call."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "scripts"))

import generate_models  # noqa: E402

from judgecal import Client  # noqa: E402

#: The client call for each operationId of the spec.
CALLS = {
    "healthz": "health",
    "readyz": "ready",
    "metrics": "metrics",
    "upload_anchors": "upload_anchors",
    "upload_comparisons": "upload_comparisons",
    "list_cells": "cells",
    "list_anchors": "anchors",
    "delete_anchor": "delete_anchor",
    "versions": "versions",
    "preferences": "preferences",
    "activate": "activate",
    "report": "report_svg",
    "agreement": "agreement",
    "compare": "compare",
    "correct": "correct",
    "estimate": "estimate",
    "rank": "rank",
    "job": "job",
    "cancel": "cancel",
    "train": "start_training",
    "list_rubrics": "rubrics",
    "put_rubric": "put_rubric",
    "judge_versions": "judge_versions",
    "rescore": "rescore",
    "bridge": "bridge",
    "check": "check",
    "get_check": "get_check",
    "judge_settings": "judge_settings",
    "put_judge_settings": "set_judge_settings",
    "open_rank_session": "open_rank_session",
    "rank_session": "rank_session",
    "rank_look": "rank_look",
    "create_panel": "create_panel",
    "list_panels": "panels",
    "get_panel": "panel",
    "delete_panel": "delete_panel",
    "plan": "plan_panel",
    "rate": "ratings",
    "create_webhook": "create_webhook",
    "list_webhooks": "webhooks",
    "delete_webhook": "delete_webhook",
    "ping_webhook": "ping_webhook",
    "webhook_deliveries": "webhook_deliveries",
}


def test_models_match_the_spec(tmp_path):
    out = tmp_path / "models.py"
    generate_models.generate(out)
    assert out.read_text() == generate_models.MODELS.read_text(), (
        "src/judgecal/models.py is stale: run clients/python/scripts/generate_models.py"
    )


def test_every_operation_has_a_call():
    spec = yaml.safe_load(generate_models.SPEC.read_text())
    ops = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    assert ops == set(CALLS), ops ^ set(CALLS)
    for name in CALLS.values():
        assert callable(getattr(Client, name)), name
