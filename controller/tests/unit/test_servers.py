"""A scenario's `servers:` (#39.4): what an image name promises, and the run refused on other versions."""

import pytest

from laglab.errors import Kind, LabError
from laglab.replicators import servers
from laglab.scenarios.plan import load_text
from laglab.scenarios.schema.scenario import ScenarioError


@pytest.mark.parametrize(
    ("image", "flavor", "version"),
    [
        ("mysql:5.7", "mysql", (5, 7)),
        ("mysql:8.0.21", "mysql", (8, 0, 21)),
        ("mysql:latest", "mysql", ()),
        ("mysql", "mysql", ()),
        ("percona/percona-server:8.0", "mysql", (8, 0)),
        ("mariadb:10.5", "mariadb", (10, 5)),
        ("laglab/mariadb:11.8-debian", "mariadb", (11, 8)),
        ("registry.example:5000/mysql:8.4", "mysql", (8, 4)),
    ],
)
def test_what_an_image_name_promises(image, flavor, version):
    promise = servers.Promise.of(image)
    assert (promise.flavor, promise.version) == (flavor, version)


@pytest.mark.parametrize(
    ("image", "reported", "kept"),
    [
        ("mysql:5.7", "5.7.44-log", True),
        ("mysql:5.7", "9.7.4-2", False),  # the stand-in of another version line never passes for it
        ("mysql:8.4", "9.7.4-2", False),
        ("mysql:8.0.21", "8.0.21", True),
        ("mysql:8.0.21", "8.0.22", False),
        ("mariadb:10.5", "10.5.23-MariaDB-0+deb11u1-log", True),
        ("mariadb:10.5", "10.11.14-MariaDB", False),
        ("mysql:latest", "10.11.14-MariaDB", False),  # the flavour too
        ("mariadb", "11.8.3-MariaDB-1", True),
    ],
)
def test_a_running_server_keeps_the_promise_or_not(image, reported, kept):
    assert servers.Promise.of(image).kept_by(reported) is kept


def test_a_run_on_other_versions_is_refused_with_the_make_up_that_brings_them():
    running = {"mysql-source": "10.5.23-MariaDB-0+deb11u1-log", "mysql-target": "10.11.14-MariaDB"}
    servers.check({"source": "mariadb:10.5", "target": None}, running)  # what is pinned runs
    with pytest.raises(LabError) as refused:
        servers.check({"source": "mariadb:10.5", "target": "mariadb:11.8"}, running)
    assert refused.value.kind is Kind.CONFLICT
    assert refused.value.message.startswith(
        "servers.target: the scenario is about mariadb:11.8, but mysql-target runs 10.11.14-MariaDB. "
        "Bring the lab up with them (SOURCE_IMAGE=mariadb:10.5 TARGET_IMAGE=mariadb:11.8 in .env"
    )


def test_the_scenario_key_takes_image_names_of_one_flavour():
    text = "name: upgrade\nservers: {source: 'mysql:5.7', target: 'mysql:8.0'}\n"
    plan = load_text(text)
    assert plan.scenario.servers.model_dump() == {"source": "mysql:5.7", "target": "mysql:8.0"}
    with pytest.raises(ScenarioError, match="servers: source and target replicate within one flavour"):
        load_text("name: upgrade\nservers: {source: 'mysql:5.7', target: 'mariadb:10.5'}\n")
    with pytest.raises(ScenarioError, match=r"servers\.source"):
        load_text("name: upgrade\nservers: {source: 'mysql:5.7; rm -rf /'}\n")


def test_the_api_refuses_a_run_on_other_versions_before_it_starts(client, app, monkeypatch):
    """POST /api/runs asks each server its version (a server answering as MariaDB 10.11 here) and
    answers 409 naming what to run; with the servers down, 503 naming the one not answering."""
    import pymysql

    lab = app.extensions["laglab"]
    answers = {"mysql-source": "10.11.14-MariaDB", "mysql-target": "10.11.14-MariaDB"}
    monkeypatch.setattr(servers, "server_version", lambda endpoint: answers[endpoint.name])
    scenario = "name: upgrade\nservers: {source: 'mariadb:10.5', target: 'mariadb:11.8'}\nload: {duration: 5s}\n"
    refused = client.post("/api/runs", json={"scenario": scenario})
    assert refused.status_code == 409 and refused.json["status"] == 409
    assert refused.json["error"].startswith("servers.source: the scenario is about mariadb:10.5, but mysql-source runs")
    assert not lab.runs  # nothing started

    def down(endpoint):
        raise pymysql.err.OperationalError(2003, f"Can't connect to MySQL server on '{endpoint.host}'")

    monkeypatch.setattr(servers, "server_version", down)
    unanswered = client.post("/api/runs", json={"scenario": scenario})
    assert unanswered.status_code == 503 and unanswered.json["error"].startswith("mysql-source: not answering")
