"""Regenerates src/judgecal/models.py from the service's openapi.yaml (two levels up) with
datamodel-code-generator, pinned in the `test` extra so the output is the same everywhere.

    python scripts/generate_models.py            # rewrite models.py
    python scripts/generate_models.py OUT.py     # write elsewhere (the drift test does)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SPEC = HERE.parent.parent / "openapi.yaml"
MODELS = HERE / "src" / "judgecal" / "models.py"

ARGS = [
    "--input-file-type", "openapi",
    "--openapi-scopes", "schemas",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--target-python-version", "3.10",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-schema-description",
    "--use-field-description",
    "--use-title-as-name",
    "--field-constraints",
    "--disable-timestamp",
    "--formatters", "builtin",
    "--custom-file-header",
    "# Generated from judgecal's openapi.yaml by clients/python/scripts/generate_models.py: do not edit.",
]


def generate(out: Path) -> None:
    exe = Path(sys.executable).with_name("datamodel-codegen")
    subprocess.run([str(exe), "--input", str(SPEC), "--output", str(out), *ARGS], check=True)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else MODELS)
