"""judgecal's Python client: `Client` / `AsyncClient` for every endpoint, pandas helpers in
`judgecal.frames`, record readers in `judgecal.records`, pairwise benchmarks' files in
`judgecal.pairwise_files`, the inspect_ai adapter in
`judgecal.inspect`. The response models in `judgecal.models` are generated from the service's
openapi.yaml (`clients/python/scripts/generate_models.py`)."""

from . import models
from .client import AsyncClient, Client
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    Conflict,
    InternalServerError,
    InvalidInput,
    JobFailed,
    JudgecalError,
    NotFound,
    PermissionDeniedError,
    Problem,
    RateLimitError,
    ServiceUnavailableError,
    Unauthorized,
    Unavailable,
    UnprocessableEntityError,
)

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "Conflict",
    "InternalServerError",
    "InvalidInput",
    "JobFailed",
    "JudgecalError",
    "NotFound",
    "PermissionDeniedError",
    "Problem",
    "RateLimitError",
    "ServiceUnavailableError",
    "Unauthorized",
    "Unavailable",
    "UnprocessableEntityError",
    "models",
]
__version__ = "0.1.0"
