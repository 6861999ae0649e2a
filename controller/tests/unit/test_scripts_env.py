"""Defect: LAB_API_TOKEN set only in .env made `make up` fail (scripts/env.sh exported only the project
name, so lag-now got 401), and scripts ignored LAGLAB_ENV_FILE. The scripts and the laglab command read
both through env.sh and laglab.cli.client."""

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from laglab.cli.client import Client

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def controller():
    """A stand-in controller that answers /api/lag only with the right token (the Docker-free part)."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") != "Bearer s3cret-s3cret-s3cret":
                body, code = {"error": "Authorization: a valid token is required", "status": 401}, 401
            else:
                sample = {"time": "2026-11-25T18:00:00.000000Z", "epoch": 1.0, "status": "ok", "lag_seconds": 0.012}
                body, code = {"latest": sample}, 200
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def env_file(tmp_path, port):
    path = tmp_path / "lab.env"
    path.write_text(f"LAB_API_TOKEN=s3cret-s3cret-s3cret\nCONTROLLER_PORT={port}\n")
    return path


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("LAB_API_TOKEN", "CONTROLLER_PORT", "LAGLAB_ENV_FILE")}
    return {**env, **extra}


def test_env_sh_exports_every_variable_of_the_env_file(tmp_path):
    path = env_file(tmp_path, 18080)
    out = subprocess.run(
        ["bash", "-c", '. scripts/env.sh && python3 -c "import os; print(os.environ[\'LAB_API_TOKEN\'], os.environ[\'CONTROLLER_PORT\'], os.environ[\'LAGLAB_ENV_FILE\'])"'],
        cwd=ROOT, env=clean_env(LAGLAB_ENV_FILE=str(path)), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == ["s3cret-s3cret-s3cret", "18080", str(path)]


def test_laglab_lag_sends_the_token_of_the_env_file(controller, tmp_path):
    port, seen = controller
    path = env_file(tmp_path, port)
    out = subprocess.run(
        [str(ROOT / "laglab"), "lag"],
        cwd=ROOT, env=clean_env(LAGLAB_ENV_FILE=str(path)), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:3] == ["18:00:00.000", "-", "12.0"]
    assert seen == ["Bearer s3cret-s3cret-s3cret"]


def test_client_reads_address_and_token_from_laglab_env_file(tmp_path):
    path = env_file(tmp_path, 18081)
    client = Client.from_env(clean_env(LAGLAB_ENV_FILE=str(path)))
    assert (client.base, client.token) == ("http://127.0.0.1:18081", "s3cret-s3cret-s3cret")
    # the process environment wins over the file, as in compose
    client = Client.from_env(clean_env(LAGLAB_ENV_FILE=str(path), LAB_API_TOKEN="other-other-other-1"))
    assert client.token == "other-other-other-1"
