"""The record readers, on files shaped as the tools write them: lm-evaluation-harness's
`--log_samples` JSONL (one sample per line, with `doc_id`, the request and response fields, and
each metric's value) and the generic JSONL/CSV records."""

from __future__ import annotations

import json

import pytest

from judgecal import records


def test_lm_eval_samples_take_the_metric_as_the_judge_score_and_references_by_doc_id(tmp_path):
    path = tmp_path / "samples_helpfulness_2026-11-25T03-00-00.jsonl"
    lines = [
        {
            "doc_id": i,
            "doc": {"question": f"q{i}"},
            "target": "",
            "arguments": [["prompt", {"until": ["\n"]}]],
            "resps": [["an answer"]],
            "filtered_resps": ["an answer"],
            "doc_hash": "x",
            "prompt_hash": "y",
            "target_hash": "z",
            "judge_score": 1.5 + i,
        }
        for i in range(3)
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    refs = tmp_path / "human.csv"
    refs.write_text("item_id,reference\n0,2.0\n2,4.5\n")
    got = list(
        records.lm_eval_samples(
            path,
            metric="judge_score",
            judge="llama-judge",
            rubric="helpfulness",
            references=records.read_references(refs),
            group="model-a",
        )
    )
    assert [(r.item_id, r.judge_score, r.reference) for r in got] == [("0", 1.5, 2.0), ("1", 2.5, None), ("2", 3.5, 4.5)]
    anchors, run = records.split(got)
    assert [a.anchor() for a in anchors][0] == {"item_id": "0", "judge_score": 1.5, "reference_score": 2.0, "group": "model-a"}
    assert [r.item() for r in run] == [{"id": "1", "score": 2.5}]
    with pytest.raises(ValueError, match="no metric 'acc'"):
        list(records.lm_eval_samples(path, metric="acc", judge="j", rubric="r"))


def test_generic_records_from_jsonl_and_csv_agree_and_bad_rows_are_named(tmp_path):
    jl = tmp_path / "r.jsonl"
    jl.write_text('{"item_id": "a", "judge": "j", "rubric": "r", "judge_score": 3, "reference": 4, "group": "s1"}\n'
                  '{"item_id": "b", "judge": "j", "rubric": "r", "score": 2.5}\n')
    csv = tmp_path / "r.csv"
    csv.write_text("item_id,judge,rubric,judge_score,reference,group\na,j,r,3,4,s1\nb,j,r,2.5,,\n")
    assert records.read(jl) == records.read(csv)
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,judge_score\nx,nan\n")
    with pytest.raises(ValueError, match="line 2: judge_score must be finite"):
        records.read(bad, judge="j", rubric="r")


def test_two_metrics_of_one_lm_eval_log_make_a_panels_anchors_and_items(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"doc_id": i, "judge_a": 3 + i % 2, "judge_b": 2.5 + i % 3}) for i in range(6)
        )
    )
    anchors, run = records.lm_eval_panel(
        path,
        metrics={"judge_a": "a", "judge_b": "b"},
        rubric="r",
        references={"0": 3.5, "1": 4.0},
        group="model-x",
    )
    assert [a["item_id"] for a in anchors["a"]] == ["0", "1"] == [a["item_id"] for a in anchors["b"]]
    assert anchors["b"][1]["judge_score"] == 3.5 and anchors["a"][1]["reference_score"] == 4.0
    assert run[0] == {"id": "2", "scores": {"a": 3.0, "b": 4.5}} and len(run) == 4
