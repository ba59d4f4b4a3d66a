"""judgecal's Python client: `Client` / `AsyncClient` for every endpoint, pandas helpers in
`judgecal.frames`, record readers in `judgecal.records`, the inspect_ai adapter in
`judgecal.inspect`. The response models in `judgecal.models` are generated from the service's
openapi.yaml (`clients/python/scripts/generate_models.py`)."""

from .client import AsyncClient, Client
from .errors import (
    Conflict,
    InvalidInput,
    JobFailed,
    JudgecalError,
    NotFound,
    Problem,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "InvalidInput",
    "JobFailed",
    "JudgecalError",
    "NotFound",
    "Problem",
    "Unauthorized",
    "Unavailable",
]
__version__ = "0.1.0"
