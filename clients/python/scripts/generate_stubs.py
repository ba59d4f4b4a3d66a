"""Writes src/judgecal/client.pyi: what type checkers and editors see of `Client` and
`AsyncClient`. Every endpoint is written once, in `_core.Endpoints`, with the return type of
the synchronous call; `AsyncClient` sends the same requests from coroutines, which Python's
types cannot say of an inherited method, so this stub spells each class out on its own: `Client`'s calls
return the model, `AsyncClient`'s are `async def` returning it.

    python scripts/generate_stubs.py            # rewrite client.pyi
    python scripts/generate_stubs.py OUT.pyi    # write elsewhere (the drift test does)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "judgecal"
STUB = PACKAGE / "client.pyi"
HEADER = """# Generated from _core.py and client.py by clients/python/scripts/generate_stubs.py: do not edit.

from typing import Any, Callable, Iterable, Mapping, Sequence

import httpx

from . import models
from ._core import Settings
from .errors import JudgecalError as JudgecalError

Progress = Callable[[models.JobDto], None]
"""


def methods(tree: ast.Module, cls: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def stub(fn: ast.FunctionDef | ast.AsyncFunctionDef, asynchronous: bool) -> str:
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    head = f"    {'async ' if asynchronous else ''}def {fn.name}({ast.unparse(fn.args)}){returns}:"
    doc = ast.get_docstring(fn, clean=False)
    body = f'\n        """{doc}"""\n        ...' if doc else " ..."
    return head + body


def generate(out: Path) -> None:
    core = ast.parse((PACKAGE / "_core.py").read_text())
    client = ast.parse((PACKAGE / "client.py").read_text())
    endpoints = [f for f in methods(core, "Endpoints") if not f.name.startswith("_")]
    parts = [HEADER]
    for cls in ("Client", "AsyncClient"):
        node = next(n for n in client.body if isinstance(n, ast.ClassDef) and n.name == cls)
        doc = ast.get_docstring(node, clean=False)
        lines = [f"class {cls}:", f'    """{doc}"""', "", "    settings: Settings"]
        own = [f for f in methods(client, cls) if f.name == "__init__" or not f.name.startswith("_")
               or f.name in ("__enter__", "__exit__", "__aenter__", "__aexit__")]
        names = {f.name for f in own}
        lines += [stub(f, isinstance(f, ast.AsyncFunctionDef)) for f in own]
        lines += [stub(f, cls == "AsyncClient") for f in endpoints if f.name not in names]
        parts.append("\n\n" + "\n".join(lines) + "\n")
    parts.append('\n\n__all__ = ["AsyncClient", "Client", "JudgecalError"]\n')
    out.write_text("".join(parts))


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else STUB)
