"""Fixtures shared by unit test modules."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laglab.scenarios.run.runner import ScenarioRun

from .fakes import close_labs, run_parts, shaping_manager


@pytest.fixture(autouse=True)
def _labs_closed():
    """Every lab a test assembled from fakes has its live files closed after it (fakes.close_labs)."""
    yield
    close_labs()


@pytest.fixture
def scenario_runs(tmp_path):
    """ScenarioRuns of plans, driven without their thread (a test calls their steps); their files are
    closed after the test."""
    made = []

    def make(plan, lab=None, text=""):
        """`lab`: the platform and executor the run's TCP buffers go through, when a test gives them."""
        given = {} if lab is None else {"platform": lab.platform, "executor": lab.executor}
        made.append(ScenarioRun(run_parts(shaping_manager(tmp_path), **given), plan, tmp_path, text))
        return made[-1]

    yield make
    for run in made:
        for series in (run._load_series, run._lag_series, run._link_series):
            series.close()


# The controller as `laglab` (the CLI) meets it over HTTP: tests/unit/test_cli.py, test_outcome.py.
class Controller:
    """Records every request; answers from `routes` ("METHOD /path" -> (status, body)), else 404 as the
    controller does for an unknown route."""

    def __init__(self):
        self.requests: list[tuple[str, str, object]] = []
        self.routes: dict[str, tuple[int, object]] = {}
        self.answering = threading.Event()  # cleared: requests are taken and held unanswered
        self.held = 0
        self.answering.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                outer.requests.append((self.command, self.path, body))
                if not outer.answering.is_set():
                    outer.held += 1  # a request now waiting for its answer
                outer.answering.wait(60)
                key = f"{self.command} {self.path.split('?')[0]}"
                code, answer = outer.routes.get(key, (404, {"error": f"no route {self.path}", "status": 404}))
                data = b"" if code == 204 else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, route: str, body=None, status: int = 200) -> None:
        self.routes[route] = (status, body)


@pytest.fixture
def controller():
    c = Controller()
    yield c
    c.server.shutdown()
    c.server.server_close()
