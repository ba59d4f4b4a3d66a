"""The inspect_ai adapter on real eval logs, made here offline with inspect's mock model
provider: two logs of one task (model-a, and model-b whose answers are 0.5 better on every
sample), graded by a mock judge that squeezes and shifts quality (judge = 0.6 + 0.7·quality +
a small deterministic wobble). Half the samples carry the human reference (the quality) in
their metadata. The de-biased mean must cover the unlabelled samples' true mean quality, and
the paired compare the true difference of −0.5."""

from __future__ import annotations

import random
import re
import zlib

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import Score, Target, mean, scorer  # noqa: E402
from inspect_ai.solver import TaskState, generate  # noqa: E402

from judgecal.inspect import calibrate_log, calibrate_panel_log, compare_logs, group_name, records  # noqa: E402

N = 160


def reply(text: str) -> ModelOutput:
    # With usage given, mockllm does not count tokens with tiktoken (whose tables it would
    # download).
    out = ModelOutput.from_content(model="mockllm", content=text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


def judge(input, tools, tool_choice, config) -> ModelOutput:
    text = input[-1].text
    q = float(re.search(r"QUALITY ([0-9.]+)", text).group(1))
    wobble = 0.15 * ((zlib.crc32(text.encode()) % 7) - 3) / 3
    return reply(f"SCORE: {min(5.0, max(1.0, round(0.6 + 0.7 * q + wobble, 2)))}")


def answer(input, tools, tool_choice, config) -> ModelOutput:
    return reply("An answer.")


@scorer(metrics=[mean()])
def graded():
    """A model-graded scorer: the (mock) judge model reads the answer and gives 1 to 5."""

    async def score(state: TaskState, target: Target) -> Score:
        grader = get_model("mockllm/judge", custom_outputs=judge)
        out = await grader.generate(
            f"Rate the answer from 1 to 5.\nQUALITY {state.metadata['quality']:.3f}\nANSWER: {state.output.completion}"
        )
        return Score(value=float(re.search(r"SCORE: ([0-9.]+)", out.completion).group(1)))

    return score


def second_judge(input, tools, tool_choice, config) -> ModelOutput:
    text = input[-1].text
    q = float(re.search(r"QUALITY ([0-9.]+)", text).group(1))
    wobble = 0.2 * ((zlib.crc32(text.encode()[::-1]) % 5) - 2) / 2
    return reply(f"SCORE: {min(5.0, max(1.0, round(1.5 + 0.5 * q + wobble, 2)))}")


@scorer(metrics=[mean()])
def graded_again():
    """A second model-graded scorer: another (mock) judge, squeezed harder, with its own wobble."""

    async def score(state: TaskState, target: Target) -> Score:
        grader = get_model("mockllm/judge2", custom_outputs=second_judge)
        out = await grader.generate(
            f"Rate the answer from 1 to 5.\nQUALITY {state.metadata['quality']:.3f}\nANSWER: {state.output.completion}"
        )
        return Score(value=float(re.search(r"SCORE: ([0-9.]+)", out.completion).group(1)))

    return score


def quality(i: int, shift: float) -> float:
    return round(random.Random(i).uniform(1.5, 4.0) + shift, 3)


def task(shift: float, scorers=None) -> Task:
    samples = []
    for i in range(N):
        meta = {"quality": quality(i, shift)}
        if i % 2 == 0:
            meta["reference"] = quality(i, shift)
        samples.append(Sample(input=f"Question {i}", id=f"s{i}", metadata=meta))
    return Task(dataset=samples, solver=generate(), scorer=scorers or graded())


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    out = {}
    for name, shift in (("model-a", 0.0), ("model-b", 0.5)):
        [log] = inspect_eval(
            task(shift),
            model=get_model(f"mockllm/{name}", custom_outputs=answer),
            log_dir=str(tmp_path_factory.mktemp(name)),
            display="none",
        )
        assert log.status == "success", log.error
        out[name] = log.location
    return out


def test_records_read_the_scorer_the_reference_and_the_model(logs):
    recs = records(logs["model-a"], judge="mock", rubric="quality")
    assert len(recs) == N and sum(r.reference is not None for r in recs) == N // 2
    assert {r.group for r in recs} == {group_name("mockllm/model-a")} == {"mockllm:model-a"}
    r0 = next(r for r in recs if r.item_id == "s0")
    assert r0.judge_score == pytest.approx(0.6 + 0.7 * quality(0, 0.0), abs=0.16)


def test_the_de_biased_mean_covers_and_the_compare_finds_the_difference(logs, client):
    result = calibrate_log(client, logs["model-a"], judge="mock", rubric="quality", train="bayes")
    assert result.anchors_uploaded == N // 2
    truth = sum(quality(i, 0.0) for i in range(1, N, 2)) / (N // 2)
    lo, hi = result.estimate.interval
    assert lo < truth < hi, (lo, hi, truth)
    # inspect's own mean is of the raw judge scores: biased, and outside the interval.
    raw = result.inspect_metrics["mean"]
    assert not lo < raw < hi, (raw, lo, hi)
    print(result.summary())
    # model-b's labelled samples join the anchors (its group too), then the paired compare.
    calibrate_log(client, logs["model-b"], judge="mock", rubric="quality", train="bayes")
    c = compare_logs(client, logs["model-a"], logs["model-b"], judge="mock", rubric="quality")
    assert c.paired and c.pairs == N
    assert c.interval[0] < -0.5 < c.interval[1] and c.p_value < 0.05, c


def test_two_scorers_of_one_log_as_a_panel(tmp_path, client):
    [log] = inspect_eval(
        task(0.0, [graded(), graded_again()]),
        model=get_model("mockllm/model-a", custom_outputs=answer),
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    result = calibrate_panel_log(
        client,
        log.location,
        panel="mockjury",
        judges={"graded": "mock-one", "graded_again": "mock-two"},
        rubric="quality",
        train="bayes",
    )
    assert result.anchors_uploaded == N // 2
    truth = sum(quality(i, 0.0) for i in range(1, N, 2)) / (N // 2)
    lo, hi = result.estimate.interval
    assert lo < truth < hi, (lo, hi, truth)
    fusion = client.versions("mockjury", "quality").versions[0].panel
    assert fusion.members == ["mock-one", "mock-two"]
    assert not any(w.canary for w in fusion.weights)
