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


# `mysqld --version` as Percona XtraDB Cluster answers it: "<path>  Ver <version> for <os> on <machine>
# (<comment>)" (mysql-server sql/mysqld.cc, print_server_version), with PXC's comment as its servers
# report it (8.0.40-31.1: "Percona XtraDB Cluster (GPL), Release rel31, Revision 4b32153, WSREP version
# 26.1.4.3"; 5.7.27-30: "... Release rel30, Revision 64987d4, WSREP version 31.39, wsrep_31.39").
PXC_VERSIONS = {
    "8.0": "/usr/sbin/mysqld  Ver 8.0.40-31.1 for Linux on x86_64 (Percona XtraDB Cluster (GPL), Release rel31, "
    "Revision 4b32153, WSREP version 26.1.4.3)",
    "5.7": "/usr/sbin/mysqld  Ver 5.7.27-30-57 for Linux on x86_64 (Percona XtraDB Cluster (GPL), Release rel30, "
    "Revision 64987d4, WSREP version 31.39, wsrep_31.39)",
}


@pytest.fixture(params=sorted(PXC_VERSIONS))
def pxc(request, tmp_path):
    """A PXC image's PATH: its `mysqld --version`, and its /entrypoint.sh (percona/percona-docker's
    percona-xtradb-cluster-8.0/dockerdir/entrypoint.sh reads CLUSTER_JOIN: empty, it initialises a
    datadir; set, the datadir comes by state transfer), which here prints CLUSTER_JOIN and its arguments."""
    bin_dir = tmp_path / "pxc-bin"
    bin_dir.mkdir()
    (bin_dir / "mysqld").write_text(f"#!/bin/sh\necho '{PXC_VERSIONS[request.param]}'\n")
    entry = bin_dir / "entrypoint.sh"
    entry.write_text('#!/bin/sh\necho "CLUSTER_JOIN=${CLUSTER_JOIN:-}"\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    for f in (bin_dir / "mysqld", entry):
        f.chmod(0o755)
    return request.param, f"{bin_dir}:{os.environ['PATH']}", str(entry)


def test_percona_xtradb_cluster_nodes_start_through_its_own_entrypoint(pxc, tmp_path):
    version, path, entry = pxc
    state = tmp_path / "grastate.dat"
    env = {"GALERA_PXC_ENTRYPOINT": entry, "GALERA_STATE_FILE": str(state), "MYSQL_ROOT_PASSWORD": "pw"}
    node1 = rendered("galera/start.sh", path, GALERA_NODE="1", **env)
    assert node1[:3] == ["galera-node1: first start, bootstrapping a new cluster", "CLUSTER_JOIN=", "mysqld"]
    assert "--wsrep-new-cluster" in node1 and "--wsrep-sst-method=xtrabackup-v2" in node1
    node2 = rendered("galera/start.sh", path, GALERA_NODE="2", **env)
    assert node2[0] == "CLUSTER_JOIN=galera-node1,galera-node2,galera-node3"  # its data comes from a donor
    assert "--wsrep-new-cluster" not in node2 and "--server-id=22" in node2
    assert "--wsrep-cluster-address=gcomm://galera-node1,galera-node2,galera-node3" in node2
    if version == "5.7":  # 5.7's xtrabackup-v2 logs in as the account its entrypoint made
        assert "--wsrep-sst-auth=xtrabackup:xtrabackup" in node2
        assert "--pxc-encrypt-cluster-traffic=OFF" not in node2  # 5.7 has no such option
        rsync = rendered("galera/start.sh", path, GALERA_NODE="2", GALERA_SST_METHOD="rsync", **env)
        assert "--wsrep-sst-method=rsync" in rsync
    else:
        assert not any(a.startswith("--wsrep-sst-auth") for a in node2)
        assert "--pxc-encrypt-cluster-traffic=OFF" in node2  # on by default, with per-container certificates


@pytest.mark.parametrize("pxc", ["8.0"], indirect=True)  # 5.7 has rsync state transfer (the test above)
def test_percona_xtradb_cluster_8_refuses_rsync_by_name(pxc, tmp_path):
    _, path, entry = pxc
    done = subprocess.run(
        [str(CONFIG / "galera/start.sh")],
        env={"PATH": path, "GALERA_NODE": "2", "GALERA_SST_METHOD": "rsync", "GALERA_PXC_ENTRYPOINT": entry},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert "GALERA_SST_METHOD=rsync: Percona XtraDB Cluster 8.0 has no rsync state transfer" in done.stderr
