"""A real judgecal server per test module and backend: the binary the Rust tests built
(`JUDGECAL_BIN`, default target/debug/judgecal), API keys on, on a free loopback port, over a
fresh embedded SQLite file and, where JUDGECAL_TEST_POSTGRES_URL is set, a fresh Postgres
database. Never a mock."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]


def binary() -> Path:
    path = Path(os.environ.get("JUDGECAL_BIN", ROOT / "target" / "debug" / "judgecal"))
    if not path.exists():
        pytest.exit(f"{path} is missing: build it first (cargo build, or scripts/test)", returncode=2)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    key: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path


def backends() -> list[str]:
    return ["sqlite", "postgres"] if os.environ.get("JUDGECAL_TEST_POSTGRES_URL") else ["sqlite"]


def database(kind: str, work: Path) -> str:
    if kind == "sqlite":
        return f"sqlite://{work}/judgecal.db"
    base = os.environ["JUDGECAL_TEST_POSTGRES_URL"]
    name = f"jc_test_py_{uuid.uuid4().hex[:12]}"
    if not shutil.which("psql"):
        pytest.exit("psql is needed to make the Postgres test database", returncode=2)
    subprocess.run(["psql", base, "-qc", f"CREATE DATABASE {name}"], check=True)
    return base[: base.rfind("/")] + "/" + name


def start(kind: str, work: Path, **settings: str) -> Server:
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "JUDGECAL__DATABASE__URL": database(kind, work),
            "JUDGECAL__SERVER__BIND": f"127.0.0.1:{port}",
            "JUDGECAL__LOG__LEVEL": "warn",
            "JUDGECAL__JOBS__POLL_MILLIS": "50",
        }
    )
    env.update({f"JUDGECAL__{k.upper()}": v for k, v in settings.items()})
    exe = str(binary())
    subprocess.run([exe, "migrate"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        [exe, "keys", "create", "--scope", "admin", "--name", "python-tests"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = out.stdout.strip().splitlines()[-1]
    log = work / "server.log"
    process = subprocess.Popen([exe, "serve"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return Server(url, key, env, process, log)
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"judgecal did not start: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module", params=backends())
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    s = start(request.param, tmp_path_factory.mktemp(request.param))
    yield s
    s.process.terminate()
    s.process.wait(timeout=10)


@pytest.fixture
def client(server: Server):
    from judgecal import Client

    with Client(server.url, server.key, retries=3, backoff=0.1) as c:
        yield c


def platform(name: str, variable: str, args: list[str], env: dict[str, str], work: Path, port: int, health: str):
    """Runs a platform's server (the executable in `variable`, from its own virtualenv) on
    loopback until its `health` path answers 200; yields its base URL, then stops it."""
    exe = os.environ.get(variable)
    if not exe:
        pytest.fail(f"{variable} ({name}'s executable) is unset: run scripts/python-client")
    log = work / "server.log"
    process = subprocess.Popen([exe, *args], env=dict(os.environ, **env), stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        try:
            if httpx.get(f"{url}{health}", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            pytest.fail(f"{name} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory):
    """A real Phoenix server (`arize-phoenix` from PyPI: JUDGECAL_PHOENIX), started once for the
    session: the OTLP receiver of the evaluation events' tests and the other end of the
    Phoenix bridge's."""
    work, port = tmp_path_factory.mktemp("phoenix"), free_port()
    env = {"PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_HOST": "127.0.0.1"}
    yield from platform("Phoenix", "JUDGECAL_PHOENIX", ["serve"], env, work, port, "/healthz")


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory):
    """A real MLflow tracking server (`mlflow` from PyPI: JUDGECAL_MLFLOW), started once for the
    session, on a SQLite store of its own."""
    work, port = tmp_path_factory.mktemp("mlflow"), free_port()
    args = ["server", "--backend-store-uri", f"sqlite:///{work}/mlflow.db", "--default-artifact-root", str(work / "artifacts"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    yield from platform("the MLflow server", "JUDGECAL_MLFLOW", args, {}, work, port, "/health")


def docs_example(page: str) -> tuple[str, list[list[str]]]:
    """A docs page's example: its Python block, and its `judgecal-py` commands (those with
    placeholders left out)."""
    text = (ROOT / "docs" / page).read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    commands = [shlex.split(line) for line in re.findall(r"^judgecal-py .*$", text, re.M) if "URL" not in line and "URI" not in line]
    return code, commands
