"""Defect: SEMI_SYNC_TIMEOUT_MS was documented and validated but never reached a container. Every
variable of config.VARIABLES must reach the service that uses it."""

import re
from pathlib import Path

import yaml

from laglab import config

ROOT = Path(__file__).resolve().parents[3]
# Read by make up on the host, not by a container: where they go instead.
HOST_SIDE = {
    "SOURCE_IMAGE": "scripts/images resolves it to RESOLVED_SOURCE_IMAGE (mysql-source's image) and SOURCE_CONFIG",
    "TARGET_IMAGE": "scripts/images resolves it to RESOLVED_TARGET_IMAGE (mysql-target's image) and TARGET_CONFIG",
    "GALERA_IMAGE": "scripts/images resolves it to RESOLVED_GALERA_IMAGE (galera-node1..3's image)",
    "BASE_IMAGE": "scripts/images resolves it to RESOLVED_BASE_IMAGE (the builds' BASE_IMAGE arg)",
    "STANDINS": "scripts/images: no stops make up where a server image cannot be had, instead of a stand-in",
    "CONTROLLER_BIND": "the published address of the controller's port",
    "CONTROLLER_PORT": "the published port of the controller",
    "EXTRA_CA_BUNDLE": "a build secret of the controller image",
    "LAB_TCP_WMEM": "scripts/env.sh writes them as the services' sysctls into .cache/compose.tcp-buffers.yaml",
    "LAB_TCP_RMEM": "scripts/env.sh writes them as the services' sysctls into .cache/compose.tcp-buffers.yaml",
}
CONTROLLER_SIDE_FILES = ("client.py",)  # laglab modules that run on the host, not in the controller


def compose():
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_every_variable_the_controller_code_reads_is_in_its_environment():
    env = compose()["x-controller-env"]
    missing = {}
    for path in (ROOT / "controller" / "laglab").rglob("*.py"):
        if path.name in ("config.py", *CONTROLLER_SIDE_FILES):
            continue
        text = path.read_text()
        for name in config.BY_NAME:
            if name not in HOST_SIDE and re.search(rf"\.{name}\b|[\x27\"]{name}[\x27\"]", text) and name not in env:
                missing.setdefault(name, []).append(path.name)
    assert missing == {}


def test_every_documented_variable_reaches_compose():
    readme, text = (ROOT / "docs/configuration.md").read_text(), (ROOT / "compose.yaml").read_text()
    documented = [v.name for v in config.VARIABLES if v.name in readme]
    assert len(documented) == len(config.VARIABLES)  # docs/configuration.md documents each one
    unused = [name for name in documented if "${" + name not in text and name not in HOST_SIDE]
    assert unused == []
    for name in HOST_SIDE:
        scripts = "".join((ROOT / "scripts" / name).read_text() for name in ("up", "images", "env.sh"))
        assert name in scripts + text


def test_the_controller_image_sees_the_semi_sync_timeout():
    assert compose()["x-controller-env"]["SEMI_SYNC_TIMEOUT_MS"] == "${SEMI_SYNC_TIMEOUT_MS:-10000}"


def test_every_image_compose_names_is_in_env_example():
    """`.env.example` lacked DTLE_IMAGE and CONSUL_IMAGE: a user could not see how to pin them."""
    names = set(re.findall(r"\$\{(\w+_IMAGE):-", (ROOT / "compose.yaml").read_text()))
    names -= {"RESOLVED_MYSQL_IMAGE", "RESOLVED_MARIADB_IMAGE", "RESOLVED_BASE_IMAGE", "RESOLVED_PROMETHEUS_IMAGE",
              "RESOLVED_SOURCE_IMAGE", "RESOLVED_TARGET_IMAGE", "RESOLVED_GALERA_IMAGE"}  # fmt: skip
    names -= {"DB_IMAGE"}  # set by make up from DB_FLAVOR and MYSQL_IMAGE / MARIADB_IMAGE
    documented = set(re.findall(r"^(\w+_IMAGE)=", (ROOT / ".env.example").read_text(), re.M))
    assert {"DTLE_IMAGE", "CONSUL_IMAGE"} <= names
    assert names - documented == set()


def test_the_dtle_agents_and_consul_come_back_after_a_kill():
    """Issue #21: the agents had no restart policy; a killed dtle-dst stayed down and the hand-back failed."""
    services = compose()["services"]
    assert {name: services[name].get("restart") for name in ("consul", "dtle-src", "dtle-dst")} == {
        "consul": "unless-stopped", "dtle-src": "unless-stopped", "dtle-dst": "unless-stopped",
    }  # fmt: skip
