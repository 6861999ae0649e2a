"""The cluster nodes' start scripts render the server's options from the environment (.env): run
them with a stand-in `docker-entrypoint.sh` on PATH that prints the arguments it is given."""

import os
import subprocess
from pathlib import Path

import pytest

CONFIG = Path(__file__).resolve().parents[3] / "config"


@pytest.fixture
def entrypoint_path(tmp_path):
    fake = tmp_path / "docker-entrypoint.sh"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    return f"{tmp_path}:{os.environ['PATH']}"


def rendered(script: str, path: str, **env) -> list[str]:
    done = subprocess.run(
        [str(CONFIG / script)], env={"PATH": path, **env}, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.splitlines()


def test_group_replication_node_options(entrypoint_path):
    args = rendered(
        "group-replication/start.sh",
        entrypoint_path,
        GR_NODE="2",
        GR_GROUP_NAME="6f1a4c2e-6d1b-4b8e-9d1e-1a2b3c4d5e6f",
        GR_EXPEL_TIMEOUT="30",
        GR_CONSISTENCY="BEFORE_ON_PRIMARY_FAILOVER",
    )
    assert args[0] == "mysqld"
    assert "--server-id=12" in args and "--report-host=gr-node2" in args
    assert "--loose-group-replication-local-address=gr-node2:33061" in args
    assert "--loose-group-replication-group-name=6f1a4c2e-6d1b-4b8e-9d1e-1a2b3c4d5e6f" in args
    assert "--loose-group-replication-member-expel-timeout=30" in args
    assert "--loose-group-replication-unreachable-majority-timeout=0" in args  # default
    assert "--loose-group-replication-consistency=BEFORE_ON_PRIMARY_FAILOVER" in args


def test_galera_node_options_and_first_start_bootstrap(entrypoint_path, tmp_path):
    env = {
        "GALERA_SEGMENTS": "0,0,1",
        "GALERA_SUSPECT_TIMEOUT": "PT10S",
        "GALERA_INACTIVE_TIMEOUT": "PT30S",
        "MARIADB_ROOT_PASSWORD": "pw",
    }
    node3 = rendered("galera/start.sh", entrypoint_path, GALERA_NODE="3", **env)
    assert node3[0] == "mariadbd"
    assert "--wsrep-provider-options=evs.suspect_timeout=PT10S;evs.inactive_timeout=PT30S;gmcast.segment=1" in node3
    assert "--wsrep-cluster-address=gcomm://galera-node1,galera-node2,galera-node3" in node3
    assert "--wsrep-node-name=galera-node3" in node3 and "--server-id=23" in node3
    assert "--wsrep-sst-method=mariabackup" in node3 and "--wsrep-sst-auth=root:pw" in node3
    assert "--wsrep-new-cluster" not in node3  # only node 1 bootstraps
    rsync = rendered("galera/start.sh", entrypoint_path, GALERA_NODE="2", GALERA_SST_METHOD="rsync")
    assert "--wsrep-sst-method=rsync" in rsync and not any(a.startswith("--wsrep-sst-auth") for a in rsync)
    state = tmp_path / "grastate.dat"
    node1 = rendered("galera/start.sh", entrypoint_path, GALERA_NODE="1", GALERA_STATE_FILE=str(state), **env)
    assert "--wsrep-new-cluster" in node1  # no grastate.dat: a first start
    assert any(a.endswith("gmcast.segment=0") for a in node1)


def test_galera_node1_bootstraps_again_when_no_peer_answers(entrypoint_path, tmp_path):
    state = tmp_path / "grastate.dat"
    state.write_text("# GALERA saved state\nversion: 2.1\nseqno:   42\nsafe_to_bootstrap: 0\n")
    # galera-node2/3 do not resolve outside the lab: no peer answers, as after `make down`.
    node1 = rendered("galera/start.sh", entrypoint_path, GALERA_NODE="1", GALERA_STATE_FILE=str(state))
    assert "--wsrep-new-cluster" in node1
    assert "safe_to_bootstrap: 1" in state.read_text()
    node2 = rendered("galera/start.sh", entrypoint_path, GALERA_NODE="2", GALERA_STATE_FILE=str(state))
    assert "--wsrep-new-cluster" not in node2
