"""Fixtures for tests against the running lab (`make up`): settings from .env, direct connections to
both servers on their published ports, the controller's API, and docker compose for this project."""

import os
import subprocess
from pathlib import Path

import pymysql
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from laglab import config
from laglab.cli.client import Client
from laglab.replicators.db import Endpoint, connect

from ..polling import wait_until

ROOT = Path(__file__).resolve().parents[3]


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def settings():
    env_file = Path(os.environ.get("LAGLAB_ENV_FILE", ROOT / ".env"))
    return config.load(os.environ, config.read_env_file(env_file) if env_file.exists() else {})


@pytest.fixture(scope="session")
def source_ep(settings):
    return Endpoint("127.0.0.1", settings.SOURCE_PORT, "root", settings.MYSQL_ROOT_PASSWORD, "mysql-source")


@pytest.fixture(scope="session")
def target_ep(settings):
    return Endpoint("127.0.0.1", settings.TARGET_PORT, "root", settings.MYSQL_ROOT_PASSWORD, "mysql-target")


@pytest.fixture
def source(source_ep):
    conn = connect(source_ep, timeout=5)
    yield conn
    conn.close()


@pytest.fixture
def target(target_ep):
    conn = connect(target_ep, timeout=5)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def api(settings):
    """The controller's API through the lab's one client (laglab.cli.client), as the scripts use it."""
    return Client(f"http://{settings.CONTROLLER_BIND}:{settings.CONTROLLER_PORT}", settings.LAB_API_TOKEN)


@pytest.fixture(scope="session", autouse=True)
def unshaped_lab(api):
    """Every test starts from a lab without shaping (saved shaping survives controller restarts)."""
    response = api.delete("/api/shaping", timeout=60)
    assert response.status_code == 204, response.text


def controller_answers(api) -> bool:
    try:
        return api.get("/api/health", timeout=5).status_code == 200
    except OSError:  # refused or timed out: restarting (a test restarts it, or a profile's `up` recreates it)
        return False


def lab_changes(api) -> list[str]:
    """What a test may leave in the lab that changes the next one's: shaping, a delay matrix, a
    partition, a fault in force, a scenario run, the panel's load (each as GET reads it)."""
    found = []
    shaping = api.get("/api/shaping").json()["shaping"]
    found += [f"shaping of {s['service']}: {s['desired']}" for s in shaping if s["desired"]]
    if (matrix := api.get("/api/matrix").json())["matrix"] is not None:
        found.append(f"delay matrix: {matrix['matrix']}")
    found += [f"partition {p['a']} / {p['b']}" for p in api.get("/api/partitions").json()["partitions"]]
    found += [f"fault {f['action']} on {f['service']} ({f['id']})" for f in api.get("/api/faults").json()["active"]]
    runs = api.get("/api/runs").json()["runs"]
    found += [f"run {r['id']} {r['status']} ({r['step']})" for r in runs if r["step"] != "done"]  # cleanup too
    if (load := api.get("/api/load").json())["running"]:
        found.append(f"load of {load['owner']}")
    return found


def undo_lab_changes(api) -> None:
    """Each of lab_changes() undone through the API, the runs first (they own shaping and load)."""
    for run in api.get("/api/runs").json()["runs"]:
        if run["status"] in ("pending", "running"):
            api.delete(f"/api/runs/{run['id']}")
    wait_until(lambda: all(r["step"] == "done" for r in api.get("/api/runs").json()["runs"]), 180, 1, "the runs to end")
    if api.get("/api/load").json()["running"]:
        api.delete("/api/load")
        wait_until(lambda: not api.get("/api/load").json()["running"], 60, 0.5, "the panel's load to stop")
    for fault in api.get("/api/faults").json()["active"]:
        api.delete(f"/api/faults/{fault['id']}", timeout=120)
    api.delete("/api/partitions", timeout=120)
    api.delete("/api/matrix", timeout=120)
    api.delete("/api/shaping", timeout=120)


@pytest.fixture(autouse=True)
def lab_as_found(request, api):
    """Each test starts with the lab as the first one found it (asserted: no shaping, matrix, partition,
    fault in force, run or panel load), and whatever it leaves, failed or not, is undone after it (its
    own fixtures' teardowns run first). A controller that a test restarted is waited for. The server
    versions' tests run their own labs beside the unit tests (scripts/test) and are left out."""
    if request.node.path.name == "test_server_versions.py":
        yield
        return
    wait_until(lambda: controller_answers(api), 180, 1, "the controller to answer")
    found = lab_changes(api)
    assert not found, f"the lab does not start clean: {found}"
    yield
    wait_until(lambda: controller_answers(api), 180, 1, "the controller to answer")
    if lab_changes(api):
        undo_lab_changes(api)
        wait_until(lambda: not lab_changes(api), 60, 1, "the lab to be as the test found it")


TCP_BUFFERS = ROOT / ".cache" / "compose.tcp-buffers.yaml"


@pytest.fixture(scope="session")
def compose(settings):
    env_file = os.environ.get("LAGLAB_ENV_FILE", str(ROOT / ".env"))

    def run(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        argv = [
            "docker",
            "compose",
            "--project-directory",
            str(ROOT),
            "-f",
            str(ROOT / "compose.yaml"),
            # .env's LAB_TCP_WMEM / LAB_TCP_RMEM (scripts/env.sh writes it when they are set)
            *(["-f", str(TCP_BUFFERS)] if TCP_BUFFERS.exists() else []),
            "--env-file",
            env_file,
            *args,
        ]
        env = {**os.environ, "EXTRA_CA_BUNDLE": "./images/no-extra-ca.pem"}
        return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=timeout, env=env)

    return run


def query(conn, sql: str, args=None) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def try_query(endpoint: Endpoint, sql: str):
    try:
        conn = connect(endpoint, timeout=2)
    except pymysql.MySQLError:
        return None
    try:
        return query(conn, sql)
    except pymysql.MySQLError:  # e.g. the table has not replicated yet
        return None
    finally:
        conn.close()


@pytest.fixture
def browser():
    """Debian's headless Chromium through its chromedriver (scripts/test installs both)."""
    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
    ):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()
