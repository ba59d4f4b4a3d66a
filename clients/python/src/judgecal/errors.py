"""The exceptions the client raises: one per kind of answer a caller acts on differently."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class JudgecalError(Exception):
    """An answer other than success. `code` is the service's stable code (`invalid_input`,
    `conflict`, `not_found`, ...), `message` what to fix, `details` one `Problem` per row and
    field, `status` the HTTP status (None when no answer came back)."""

    message: str
    code: str = "error"
    status: int | None = None
    details: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        where = "; ".join(
            f"row {p.row}, {p.field}: {p.problem}" if p.row is not None else f"{p.field}: {p.problem}"
            for p in self.details[:5]
        )
        more = f" (+{len(self.details) - 5} more)" if len(self.details) > 5 else ""
        head = f"{self.status} {self.code}: {self.message}" if self.status else self.message
        return f"{head} [{where}{more}]" if where else head


class InvalidInput(JudgecalError):
    """422 (or 400): the request was refused whole; `details` names every row and field."""


class NotFound(JudgecalError):
    """404: no such cell, version or job."""


class Conflict(JudgecalError):
    """409: for example anchors stored with other scores (upload with `replace=True`)."""


class Unauthorized(JudgecalError):
    """401 or 403: no key, an unknown key, or a key without the scope."""


class Unavailable(JudgecalError):
    """429 or 503 after the retries, a timeout, or no connection at all."""


class JobFailed(JudgecalError):
    """A training job that ended `failed` or `cancelled`."""


_BY_STATUS: dict[int, type[JudgecalError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
    429: Unavailable,
    503: Unavailable,
}


def from_response(status: int, body: Any) -> JudgecalError:
    """The exception for an error answer whose JSON body is `body` (the service's
    `{"error": {code, message, details}}`, or anything else from a proxy)."""
    kind = _BY_STATUS.get(status, JudgecalError)
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return kind(message=f"HTTP {status}: {str(body)[:200]}", code="http", status=status)
    return kind(
        message=err.get("message", ""),
        code=err.get("code", "error"),
        status=status,
        details=[Problem.from_json(d) for d in err.get("details") or [] if isinstance(d, dict)],
    )
