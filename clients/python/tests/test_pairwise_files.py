"""The pairwise file readers map each format's verdicts onto judgecal's (a shown first, the
swapped verdict mapped back), join the people's labels, count what they leave out; and a
file read that way trains a pairwise cell whose biases come back as a frame."""

from __future__ import annotations

import json
import random

from judgecal import Client
from judgecal.pairwise_files import alpaca_eval, arena_hard, mt_bench_pairs


def test_alpaca_eval_reads_preferences_orders_and_lengths(tmp_path):
    base = {"instruction": "Name a colour.", "generator_1": "gpt4_turbo", "generator_2": "mine",
            "output_1": "Red.", "output_2": "A deep, lovely blue."}
    annotations = [
        dict(base, preference=1.0),  # output_1 (gpt4_turbo) better
        dict(base, instruction="Say hi.", preference=1.75, is_switched_outputs=True),
        dict(base, instruction="Broken.", preference=None),
        dict(base, instruction="Tie.", preference=1.5),
    ]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(annotations))
    human = [dict(base, preference=2.0), dict(base, preference=1.0),
             dict(base, instruction="Say hi.", preference=2.0)]
    read = alpaca_eval(path, human=human)
    assert read.skipped == 1
    first, switched, tie = read.rows
    assert (first["a"], first["b"], first["verdict"]) == ("gpt4_turbo", "mine", 1.0)
    assert first["preference"] == 0.5  # one person each way
    assert first["covariates"]["length_diff"] == len("Red.") - len("A deep, lovely blue.")
    # Shown switched: mine was first, so mine is a; 1.75 (output_2 mostly better) says a.
    assert (switched["a"], switched["b"]) == ("mine", "gpt4_turbo")
    assert abs(switched["verdict"] - 0.75) < 1e-12
    assert switched["preference"] == 1.0
    assert switched["covariates"]["length_diff"] > 0
    assert tie["verdict"] == 0.5 and "preference" not in tie
    assert len({r["item_id"] for r in read.rows}) == 3


def test_arena_hard_reads_both_games_with_the_baseline_first(tmp_path):
    folder = tmp_path / "gpt-4-1106-preview"
    folder.mkdir()
    lines = [
        {"question_id": "q1", "model": "mine", "games": [{"score": "A>>B"}, {"score": "B>A"}]},
        {"question_id": "q2", "model": "mine", "games": [{"score": "B>A"}, {"score": "A=B"}]},
        {"question_id": "q3", "model": "mine", "games": [{"score": None}, {"score": "A>B"}]},
        {"question_id": "q4", "model": "mine", "games": [{"score": None}, {"score": None}]},
    ]
    (folder / "mine.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    read = arena_hard(folder, baseline="base")
    assert read.skipped == 1
    q1, q2, q3 = read.rows
    # Game 1: the baseline is A and won; game 2: the model is A and lost, so a (base) won.
    assert (q1["a"], q1["b"], q1["verdict"], q1["verdict_swapped"]) == ("base", "mine", "a", "a")
    assert (q2["verdict"], q2["verdict_swapped"]) == ("b", "tie")
    # Only game 2: the model was shown first, so it is a, and it won.
    assert (q3["a"], q3["b"], q3["verdict"]) == ("mine", "base", "a")
    assert "verdict_swapped" not in q3


def test_mt_bench_pairs_join_the_human_judgments_in_either_order():
    judgments = [
        {"question_id": 81, "model_1": "gpt-4", "model_2": "vicuna", "g1_winner": "model_1",
         "g2_winner": "model_2", "turn": 1},
        {"question_id": 82, "model_1": "gpt-4", "model_2": "vicuna", "g1_winner": "error",
         "g2_winner": "model_2", "turn": 1},
        {"question_id": 83, "model_1": "gpt-4", "model_2": "vicuna", "g1_winner": "error",
         "g2_winner": "error", "turn": 1},
        {"question_id": 81, "model_1": "gpt-4", "model_2": "vicuna", "g1_winner": "tie",
         "g2_winner": "tie", "turn": 2},
    ]
    human = [
        {"question_id": 81, "model_a": "vicuna", "model_b": "gpt-4", "winner": "model_b", "turn": 1},
        {"question_id": 81, "model_a": "gpt-4", "model_b": "vicuna", "winner": "tie (bothbad)", "turn": 1},
        {"question_id": 82, "model_a": "gpt-4", "model_b": "vicuna", "winner": "model_a", "turn": 1},
    ]
    read = mt_bench_pairs(judgments, human=human, turn=1)
    assert read.skipped == 1
    q81, q82 = read.rows
    assert (q81["a"], q81["verdict"], q81["verdict_swapped"]) == ("gpt-4", 1.0, 0.0)
    assert q81["preference"] == 0.75  # gpt-4 preferred once, one tie
    # Only the order with vicuna first, and vicuna won: vicuna is a and won; people preferred
    # gpt-4.
    assert (q82["a"], q82["b"], q82["verdict"], q82["preference"]) == ("vicuna", "gpt-4", 1.0, 0.0)
    assert len(mt_bench_pairs(judgments).rows) == 3


def test_an_arena_hard_file_trains_a_pairwise_cell_and_shows_its_biases(server, tmp_path):
    from judgecal.frames import biases_frame

    # A judge that picks the answer it is shown first 80% of the time it is unsure.
    rng = random.Random(7)
    lines, human = [], {}
    for q in range(300):
        model = ["mine", "other"][q % 2]
        better = rng.random() < (0.7 if model == "mine" else 0.4)
        games = []
        for model_first in (False, True):
            first_wins = rng.random() < 0.8 if rng.random() < 0.5 else (better == model_first)
            games.append({"score": "A>B" if first_wins else "B>A"})
        lines.append({"question_id": f"q{q}", "model": model, "games": games})
        human[f"q{q}:{model}"] = "b" if better else "a"
    path = tmp_path / "judgments.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    read = arena_hard(path, baseline="base")
    rows = [dict(r, preference=human[r["item_id"]]) for r in read.rows]
    with Client(server.url, server.key) as jc:
        jc.upload_comparisons("arena-judge", "overall", rows)
        jc.train("arena-judge", method="auto", progress=False)
        frame = biases_frame(jc.preferences("arena-judge", "overall"))
    judge_first = frame[(frame.diagnostic == "first_position") & (frame.source == "judge")].iloc[0]
    assert judge_first.lo > 0.55, frame
    flips = frame[frame.diagnostic == "flip"].iloc[0]
    assert flips.estimate > 0.2, frame
    assert set(frame[frame.diagnostic == "favouritism"].source) == {"base", "mine", "other"}


def test_several_judges_rows_join_into_a_panels_run_rows():
    from judgecal.pairwise_files import panel

    x = [{"item_id": "p1", "a": "m1", "b": "m2", "verdict": "a", "verdict_swapped": "b",
          "covariates": {"length_diff": 3.0}},
         {"item_id": "p2", "a": "m1", "b": "m3", "verdict": "b", "preference": "b"},
         {"item_id": "p3", "a": "m2", "b": "m3", "verdict": "tie"}]
    y = [{"item_id": "p2", "a": "m1", "b": "m3", "verdict": 0.2},
         {"item_id": "p1", "a": "m1", "b": "m2", "verdict": "a", "preference": "a"}]
    read = panel({"x": x, "y": y})
    assert read.skipped == 1  # p3: y did not judge it
    assert read.rows == [
        {"item_id": "p1", "a": "m1", "b": "m2", "verdicts": {"x": "a", "y": "a"},
         "verdicts_swapped": {"x": "b"}, "preference": "a", "covariates": {"length_diff": 3.0}},
        {"item_id": "p2", "a": "m1", "b": "m3", "verdicts": {"x": "b", "y": 0.2}, "preference": "b"},
    ]
    import pytest

    with pytest.raises(ValueError, match="item p1"):
        panel({"x": x, "y": [dict(y[1], a="m2", b="m1")]})
    with pytest.raises(ValueError, match="item p2"):
        panel({"x": x, "y": [dict(y[0], preference="a")]})
