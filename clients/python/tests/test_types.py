"""What a caller's tools see: exceptions that pickle (multiprocessing workers raise them across
processes) and carry the service's request id, one class per status, and types a checker
reads (`mypy --strict` over examples/typed.py, against the generated client.pyi)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from judgecal import errors

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "scripts"))

import generate_stubs  # noqa: E402

#: Every status the service answers with an error, and the class a caller catches.
CLASSES = {
    400: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFound,
    409: errors.Conflict,
    422: errors.UnprocessableEntityError,
    429: errors.RateLimitError,
    500: errors.InternalServerError,
    503: errors.ServiceUnavailableError,
}


def test_each_status_has_its_class_and_the_old_ones_still_catch_it():
    for status, kind in CLASSES.items():
        err = errors.from_response(status, {"error": {"code": "c", "message": "m"}}, "rid")
        assert type(err) is kind and err.status_code == status and err.request_id == "rid"
        assert isinstance(err, errors.APIStatusError)
    assert issubclass(errors.UnprocessableEntityError, errors.InvalidInput)
    assert issubclass(errors.BadRequestError, errors.InvalidInput)
    assert issubclass(errors.AuthenticationError, errors.Unauthorized)
    assert issubclass(errors.PermissionDeniedError, errors.Unauthorized)
    assert not issubclass(errors.AuthenticationError, errors.PermissionDeniedError)
    for kind in (errors.RateLimitError, errors.ServiceUnavailableError, errors.APITimeoutError):
        assert issubclass(kind, errors.Unavailable)
    assert not issubclass(errors.InternalServerError, errors.Unavailable)
    assert type(errors.from_response(502, "bad gateway")) is errors.InternalServerError


def test_every_exception_survives_a_pickle_round_trip():
    body = {"error": {"code": "invalid_input", "message": "refused", "details": [
        {"row": 3, "field": "reference_score", "problem": "outside [1, 5]"}]}}
    made = [errors.from_response(s, body, f"req-{s}") for s in CLASSES]
    made += [
        errors.APIConnectionError(message="no answer", code="unreachable"),
        errors.APITimeoutError(message="too slow", code="timeout"),
        errors.JobFailed(message="job j failed", code="failed"),
    ]
    for err in made:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert vars(back) == vars(err) and str(back) == str(err) and back.args == err.args


def test_an_error_from_the_service_carries_its_request_id(server):
    from judgecal import Client

    with Client(server.url, server.key, retries=0) as jc, pytest.raises(errors.NotFound) as e:
        jc.estimate("nobody", "coherence", [3.0])
    assert e.value.request_id and len(e.value.request_id) >= 32
    assert e.value.request_id in str(e.value)
    back = pickle.loads(pickle.dumps(e.value))
    assert back.request_id == e.value.request_id and back.details == e.value.details


def test_server_errors_are_retried_on_idempotent_calls_only():
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        return httpx.Response(500, json={"error": {"code": "internal", "message": "logged"}},
                              headers={"x-request-id": "abc"})

    from judgecal import Client

    with Client("http://judgecal.test", retries=2, backoff=0.0, transport=httpx.MockTransport(handler)) as jc:
        with pytest.raises(errors.InternalServerError) as e:
            jc.cells()
        assert calls == ["GET"] * 3 and e.value.request_id == "abc"
        calls.clear()
        with pytest.raises(errors.InternalServerError):
            jc.start_training("j1", "bayes")
        assert calls == ["POST"]


def test_the_stub_matches_the_client(tmp_path):
    out = tmp_path / "client.pyi"
    generate_stubs.generate(out)
    assert out.read_text() == generate_stubs.STUB.read_text(), (
        "src/judgecal/client.pyi is stale: run clients/python/scripts/generate_stubs.py"
    )


def test_a_type_checker_sees_each_calls_model():
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(HERE / "examples" / "typed.py")],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # And it is not vacuous: a wrong model is an error.
    wrong = HERE / "examples" / "typed.py"
    text = wrong.read_text().replace("answer: models.EstimateResponse", "answer: models.CompareResponse")
    bad = Path(checked.args[-1]).with_name("_wrong_typed.py")
    try:
        bad.write_text(text)
        failed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(bad)],
                                capture_output=True, text=True, cwd=HERE)
    finally:
        bad.unlink(missing_ok=True)
    assert failed.returncode == 1 and "EstimateResponse" in failed.stdout, failed.stdout
