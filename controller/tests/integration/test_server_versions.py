"""The server versions Debian carries besides the lab's own, for real (#39): MariaDB 10.5 (bullseye) and
11.8 (trixie), each a lab of its own (project laglab-v105 / laglab-v118, its own ports) brought up by
the same `scripts/up` with `MARIADB_IMAGE=mariadb:10.5` / `mariadb:11.8`, and a 10.5 -> 11.8 pair
(`SOURCE_IMAGE` / `TARGET_IMAGE`). Each: replication flowing, the server's grammar as
tests/unit/server_versions.py says it (the rules the versions not here are tested with), its option
files, zlib compression, a shaped link, a fault and its recovery, the consistency check; the README's
customer example with --quick on each, and on the pair (pinned by `servers:`). MySQL 9.7, the lab's
own: test_server_grammar.py; MariaDB 10.11, the default stand-in: test_mariadb.py.

`make test` runs this module beside the unit tests (scripts/test): what it judges holds on a busy
machine (rows, GTIDs and checksums, a lag at least the delay asked, a verdict written)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pymysql
import pytest

from laglab.cli.client import Client
from laglab.replicators import native
from laglab.replicators.db import Dialect, Endpoint, connect

from .conftest import ROOT, query, wait_until
from .server_probe import grammar_disagreements, option_names, unknown_options

VERSIONS = {
    "10.5": {"CONTROLLER_PORT": 18180, "SOURCE_PORT": 23406, "TARGET_PORT": 23407},
    "11.8": {"CONTROLLER_PORT": 18280, "SOURCE_PORT": 23506, "TARGET_PORT": 23507},
}
PAIR_PORTS = {"CONTROLLER_PORT": 18380, "SOURCE_PORT": 23606, "TARGET_PORT": 23607}


def lab_env(project: str, settings: str, ports: dict, folder) -> dict:
    """The environment of a lab of its own: an env file with its project, settings and ports."""
    env_file = folder / "lab.env"
    env_file.write_text(f"COMPOSE_PROJECT_NAME={project}\n{settings}" + "".join(f"{k}={v}\n" for k, v in ports.items()))
    drop = ("DB_FLAVOR", "COMPOSE_PROJECT_NAME", "PROFILE", "LAB_API_TOKEN", "SOURCE_IMAGE", "TARGET_IMAGE", *ports)
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "LAGLAB_ENV_FILE": str(env_file)}


def test_make_up_stops_for_a_version_debian_does_not_carry(tmp_path):
    """MySQL 5.7 cannot be pulled here and Debian has none: make up says so and which versions this
    machine can run, and starts nothing (never MySQL 9.7 in 5.7's place)."""
    env = lab_env("laglab-v57", "MYSQL_IMAGE=mysql:5.7\n", PAIR_PORTS, tmp_path)
    up = subprocess.run([str(ROOT / "scripts/up")], env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode != 0
    assert "mysql:5.7 (the mysql server image) is not here and cannot be pulled" in up.stderr, up.stderr[-2000:]
    assert "Debian carries no server of that version" in up.stderr and "mariadb:10.5" in up.stderr
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose.project=laglab-v57"],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert listed.stdout.strip() == ""


def test_standins_no_stops_make_up_instead_of_building_debians_build(tmp_path):
    """#53: a ticket about the official build must not run on Debian's without the user knowing: with
    STANDINS=no, mysql:8.4 (not pullable here) stops make up, naming the stand-in it did not build."""
    env = lab_env("laglab-nostandin", "MYSQL_IMAGE=mysql:8.4\nSTANDINS=no\n", PAIR_PORTS, tmp_path)
    up = subprocess.run([str(ROOT / "scripts/up")], env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode != 0
    assert "mysql:8.4 (the mysql server image) is not here and cannot be pulled" in up.stderr, up.stderr[-2000:]
    assert "STANDINS=no: not building Debian's stand-in laglab/mysql:9.7-debian" in up.stderr, up.stderr[-2000:]
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose.project=laglab-nostandin"],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert listed.stdout.strip() == ""


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def versioned_lab(request, tmp_path_factory):
    version = request.param
    ports = VERSIONS[version]
    settings = f"DB_FLAVOR=mariadb\nMARIADB_IMAGE=mariadb:{version}\n"
    env = lab_env(f"laglab-v{version.replace('.', '')}", settings, ports, tmp_path_factory.mktemp(f"v{version}"))
    up = subprocess.run([str(ROOT / "scripts/up")], env=env, capture_output=True, text=True, timeout=1200)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield version, ports, env, up
    finally:
        subprocess.run([str(ROOT / "scripts/down"), "--volumes"], env=env, capture_output=True, timeout=300)


def endpoints(ports) -> tuple[Endpoint, Endpoint]:
    return (
        Endpoint("127.0.0.1", ports["SOURCE_PORT"], "root", "laglab", "mysql-source"),
        Endpoint("127.0.0.1", ports["TARGET_PORT"], "root", "laglab", "mysql-target"),
    )


def test_the_version_asked_for_replicates_and_answers_as_the_rules_say(versioned_lab):
    version, ports, env, up = versioned_lab
    assert f"mariadb:{version} cannot be pulled here; using laglab/mariadb:{version}-debian" in up.stderr
    source_ep, target_ep = endpoints(ports)
    source, target = connect(source_ep, timeout=5), connect(target_ep, timeout=5)
    try:
        reported = query(target, "SELECT VERSION() AS v")[0]["v"]
        assert reported.startswith(f"{version}.") and "MariaDB" in reported, reported
        assert query(target, Dialect.from_version(reported).replica_status)[0]["Using_Gtid"] == "Slave_Pos"
        assert grammar_disagreements(target, reported) == []
        for name in ("source.cnf", "target.cnf"):
            assert unknown_options(target, option_names(ROOT / "config/mariadb" / name)) == []
        # zlib, MariaDB's one compression of the replica connection (slave_compressed_protocol), and back.
        dialect = Dialect.from_version(reported)
        for wanted, expected in ((("zlib", 3, False, False), 1), (native.DEFAULT_NETWORK, 0)):
            for _, sql in native.option_statements(dialect, wanted):
                query(target, sql)
            assert query(target, "SELECT @@GLOBAL.slave_compressed_protocol AS c")[0]["c"] == expected
        query(source, "CREATE TABLE lab.it_version (id INT PRIMARY KEY)")
        query(source, "INSERT INTO lab.it_version VALUES (1), (2)")
        arrived = "SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'lab' AND TABLE_NAME = 'it_version'"
        wait_until(
            lambda: query(target, arrived)[0]["n"] and query(target, "SELECT COUNT(*) AS n FROM lab.it_version")[0]["n"] == 2,
            30, message=f"rows on the MariaDB {version} replica",
        )  # fmt: skip
    finally:
        source.close()
        target.close()
    status = subprocess.run([str(ROOT / "laglab"), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert re.search(rf"(?m)^servers     mysql-source MariaDB {re.escape(version)}\.\d+, mysql-target MariaDB {re.escape(version)}\.\d+$",
                     status.stdout), status.stdout  # fmt: skip
    api = Client.from_env(env)
    lag = api.get("/api/lag?seconds=2", timeout=10).json()
    assert lag["samples"] and all(s["status"] == "ok" for s in lag["samples"])
    assert (
        lag["split_unavailable"].startswith(f"MariaDB {version}.") and "applier timestamps" in lag["split_unavailable"]
    )


def test_a_fault_on_the_replica_and_replication_recovers(versioned_lab):
    version, ports, env, _ = versioned_lab
    laglab = [str(ROOT / "laglab")]
    killed = subprocess.run(
        [*laglab, "fault", "restart", "mysql-target"], env=env, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == 0 and re.match(r"^fault f\d+: restart mysql-target", killed.stdout), (
        killed.stdout + killed.stderr
    )
    source_ep, target_ep = endpoints(ports)
    source = connect(source_ep, timeout=5)
    try:
        query(source, "CREATE TABLE IF NOT EXISTS lab.it_after_fault (id INT PRIMARY KEY)")
        query(source, "INSERT INTO lab.it_after_fault VALUES (1)")
    finally:
        source.close()

    def arrived() -> bool:
        try:
            target = connect(target_ep, timeout=2)
        except pymysql.MySQLError:
            return False
        try:
            status = query(target, "SHOW SLAVE STATUS")
            rows = query(
                target, "SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_NAME = 'it_after_fault'"
            )
            return bool(status) and status[0]["Slave_SQL_Running"] == "Yes" and rows[0]["n"] == 1
        finally:
            target.close()

    wait_until(arrived, 120, message=f"MariaDB {version}'s replica back and caught up after its restart")


def test_a_shaped_link_delays_the_replica_by_what_was_asked(versioned_lab):
    """100 ms on what mysql-source sends mysql-target (./laglab shape): a heartbeat reaches the replica no
    sooner (a busy host only adds delay), so the lag reaches 100 ms; cleared, it falls back below it."""
    _, _, env, _ = versioned_lab
    laglab = [str(ROOT / "laglab")]
    shaped = subprocess.run([*laglab, "shape", "mysql-source", "--peer", "mysql-target", "--delay", "100ms"],
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shaped.returncode == 0, shaped.stdout + shaped.stderr
    api = Client.from_env(env)
    try:

        def lags() -> list[float]:
            return [
                s["lag_seconds"]
                for s in api.get("/api/lag?seconds=2", timeout=10).json()["samples"]
                if s["status"] == "ok"
            ]

        wait_until(lambda: max(lags(), default=0) >= 0.1, 30, message="a heartbeat 100 ms behind on the shaped link")
    finally:
        cleared = subprocess.run(
            [*laglab, "clear", "mysql-source"], env=env, capture_output=True, text=True, timeout=60
        )
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    wait_until(lambda: max(lags(), default=1) < 0.1, 30, message="the lag back under 100 ms once cleared")


def test_the_customer_example_runs_quick_and_the_copy_is_identical(versioned_lab):
    version, _, env, _ = versioned_lab
    run = subprocess.run(
        [str(ROOT / "laglab"), "run", "scenarios/customer-example-rtt180-2mbit.yaml", "--quick"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = re.search(r"report: (results/\S+/report\.md)", run.stdout)
    assert report, run.stdout[-2000:]
    text = (ROOT / report[1]).read_text()
    assert re.search(rf"(?m)^\*\*Settings:\*\* .*; servers mysql-source {re.escape(version)}\.\d+-MariaDB", text)
    assert re.search(r"(?m)^\*\*Verdict: (PASS|FAIL)\.\*\* ", text), text[:600]
    consistency = Client.from_env(env).get("/api/consistency?timeout=60", timeout=120).json()
    assert consistency["flavor"] == "mariadb" and consistency["identical"] is True, consistency["differences"]


PINNED = (ROOT / "scenarios/customer-example-rtt180-2mbit.yaml").read_text() + (
    "servers: {source: 'mariadb:10.5', target: 'mariadb:11.8'}\n"
)


def test_a_cross_version_pair_replicates_and_a_scenario_pinning_it_runs_there_only(tmp_path):
    """The upgrade path (#39.4): SOURCE_IMAGE=mariadb:10.5 TARGET_IMAGE=mariadb:11.8, a lab of its own.
    The customer example pinned to that pair runs there (its report names both); pinned to another
    target it is refused before it starts, naming the make up that brings what it asks for."""
    scenario, elsewhere = tmp_path / "upgrade.yaml", tmp_path / "other.yaml"
    scenario.write_text(PINNED.replace("name: customer-example-rtt180-2mbit", "name: upgrade-10-5-to-11-8"))
    elsewhere.write_text(scenario.read_text().replace("target: 'mariadb:11.8'", "target: 'mariadb:10.5'"))
    settings = "DB_FLAVOR=mariadb\nSOURCE_IMAGE=mariadb:10.5\nTARGET_IMAGE=mariadb:11.8\n"
    env = lab_env("laglab-pair", settings, PAIR_PORTS, tmp_path)
    up = subprocess.run([str(ROOT / "scripts/up")], env=env, capture_output=True, text=True, timeout=1200)
    laglab = [str(ROOT / "laglab"), "run"]
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        refused = subprocess.run([*laglab, str(elsewhere), "--quick"], cwd=ROOT, env=env, capture_output=True,
                                 text=True, timeout=120)  # fmt: skip
        said = refused.stderr + refused.stdout
        assert (
            refused.returncode != 0
            and "servers.target: the scenario is about mariadb:10.5, but mysql-target runs 11.8." in said
        ), said
        assert "SOURCE_IMAGE=mariadb:10.5 TARGET_IMAGE=mariadb:10.5 in .env, then make clean && make up" in said
        run = subprocess.run([*laglab, str(scenario), "--quick"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=900)  # fmt: skip
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        report = (ROOT / re.search(r"report: (results/\S+/report\.md)", run.stdout)[1]).read_text()
        assert re.search(r"servers mysql-source 10\.5\.\d+-MariaDB[^,;]*, mysql-target 11\.8\.\d+-MariaDB[^,;]*; "
                         r"asked for source mariadb:10\.5, target mariadb:11\.8\.", report), report[:1500]  # fmt: skip
        recorded = json.loads(
            (ROOT / re.search(r"report: (results/\S+)/report\.md", run.stdout)[1] / "environment.json").read_text()
        )
        assert recorded["servers_asked"] == {"source": "mariadb:10.5", "target": "mariadb:11.8"}
        assert recorded["server_versions"]["mysql-target"].startswith("11.8.")
        consistency = Client.from_env(env).get("/api/consistency?timeout=60", timeout=120).json()
        assert consistency["identical"] is True, consistency["differences"]
    finally:
        subprocess.run([str(ROOT / "scripts/down"), "--volumes"], env=env, capture_output=True, timeout=300)
