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
from laglab.client import Client
from laglab.db import Endpoint, connect

from ..polling import wait_until  # noqa: F401 - the suites import it from here

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
    """The controller's API through the lab's one client (laglab.client), as the scripts use it."""
    return Client(f"http://{settings.CONTROLLER_BIND}:{settings.CONTROLLER_PORT}", settings.LAB_API_TOKEN)


@pytest.fixture(scope="session", autouse=True)
def unshaped_lab(api):
    """Every test starts from a lab without shaping (saved shaping survives controller restarts)."""
    response = api.delete("/api/shaping", timeout=60)
    assert response.status_code == 204, response.text


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
