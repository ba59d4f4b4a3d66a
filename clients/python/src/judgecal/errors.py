"""The exceptions the client raises, shaped like the OpenAI and Anthropic clients' trees: one
class per kind of answer a caller acts on differently, all under `JudgecalError`.

    JudgecalError
    ├── APIStatusError                 the service answered with an error status
    │   ├── InvalidInput               400 or 422: `details` names every row and field
    │   │   ├── BadRequestError        400
    │   │   └── UnprocessableEntityError 422
    │   ├── Unauthorized               401 or 403
    │   │   ├── AuthenticationError    401: no key, or one the service does not know
    │   │   └── PermissionDeniedError  403: a good key without the scope
    │   ├── NotFound                   404
    │   ├── Conflict                   409
    │   ├── RateLimitError             429 (also an `Unavailable`)
    │   └── InternalServerError        5xx
    │       └── ServiceUnavailableError 503 (also an `Unavailable`)
    ├── Unavailable                    worth retrying later: 429, 503, or no answer at all
    │   └── APIConnectionError         no answer (refused, reset, DNS)
    │       └── APITimeoutError        no answer in time
    └── JobFailed                      a training job that ended failed or cancelled

Every exception pickles (multiprocessing workers raise them across processes) and carries the
`request_id` the service sent as `x-request-id`, which its logs are keyed by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Problem:
    """One problem the service found in a request: `row` is the 1-based row of the item or
    anchor (None for the request as a whole), `field` the field at fault, `problem` what is
    wrong with it."""

    row: int | None
    field: str
    problem: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Problem":
        return cls(row=d.get("row"), field=d.get("field", ""), problem=d.get("problem", ""))


def _restore(kind: type["JudgecalError"], state: dict[str, Any]) -> "JudgecalError":
    """Unpickles an exception: its class and its fields, without calling `__init__` again."""
    err = kind.__new__(kind)
    Exception.__init__(err, state.get("message", ""))
    err.__dict__.update(state)
    return err


class JudgecalError(Exception):
    """Any failure of a call. `code` is the service's stable code (`invalid_input`,
    `conflict`, `not_found`, ...), `message` what to fix, `details` one `Problem` per row and
    field, `status` the HTTP status (None when no answer came back), `request_id` the
    service's id of the request (quote it when reporting a problem), `body` the answer's
    JSON (or text) as it came."""

    def __init__(
        self,
        message: str,
        code: str = "error",
        status: int | None = None,
        details: list[Problem] | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details: list[Problem] = list(details or [])
        self.request_id = request_id
        self.body = body

    @property
    def status_code(self) -> int | None:
        """The HTTP status, under the name httpx and the OpenAI client use."""
        return self.status

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), dict(self.__dict__)))

    def __str__(self) -> str:
        where = "; ".join(
            f"row {p.row}, {p.field}: {p.problem}" if p.row is not None else f"{p.field}: {p.problem}"
            for p in self.details[:5]
        )
        more = f" (+{len(self.details) - 5} more)" if len(self.details) > 5 else ""
        head = f"{self.status} {self.code}: {self.message}" if self.status else self.message
        rid = f" (request {self.request_id})" if self.request_id else ""
        return f"{head} [{where}{more}]{rid}" if where else f"{head}{rid}"


class APIStatusError(JudgecalError):
    """The service answered with a status that is not a success."""


class InvalidInput(APIStatusError):
    """422 (or 400): the request was refused whole; `details` names every row and field."""


class BadRequestError(InvalidInput):
    """400: the body is not JSON, or not the shape the endpoint takes."""


class UnprocessableEntityError(InvalidInput):
    """422: a value is out of bounds; `details` names every row and field."""


class Unauthorized(APIStatusError):
    """401 or 403: no key, an unknown key, or a key without the scope."""


class AuthenticationError(Unauthorized):
    """401: no key, or one the service does not know."""


class PermissionDeniedError(Unauthorized):
    """403: the key lacks the scope the endpoint needs."""


class NotFound(APIStatusError):
    """404: no such cell, version or job."""


class Conflict(APIStatusError):
    """409: for example anchors stored with other scores (upload with `replace=True`)."""


class Unavailable(JudgecalError):
    """Worth another try later: 429 or 503 after the retries, a timeout, or no connection."""


class RateLimitError(APIStatusError, Unavailable):
    """429: too many requests in flight; retried with backoff before it is raised."""


class InternalServerError(APIStatusError):
    """5xx: the service failed (its logs have the cause under `request_id`); idempotent calls
    are retried with backoff before it is raised."""


class ServiceUnavailableError(InternalServerError, Unavailable):
    """503: the service is not ready, or the request ran past its time limit."""


class APIConnectionError(Unavailable):
    """No answer: the connection was refused or dropped."""


class APITimeoutError(APIConnectionError):
    """No answer within the client's `timeout`."""


class JobFailed(JudgecalError):
    """A training job that ended `failed` or `cancelled`."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFound,
    409: Conflict,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_class(status: int) -> type[APIStatusError]:
    """The exception class for an error status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return InternalServerError if status >= 500 else APIStatusError


def from_response(status: int, body: Any, request_id: str | None = None) -> APIStatusError:
    """The exception for an error answer whose JSON body is `body` (the service's
    `{"error": {code, message, details}}`, or anything else from a proxy)."""
    kind = error_class(status)
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return kind(
            message=f"HTTP {status}: {str(body)[:200]}",
            code="http",
            status=status,
            request_id=request_id,
            body=body,
        )
    return kind(
        message=err.get("message", ""),
        code=err.get("code", "error"),
        status=status,
        details=[Problem.from_json(d) for d in err.get("details") or [] if isinstance(d, dict)],
        request_id=request_id,
        body=body,
    )
