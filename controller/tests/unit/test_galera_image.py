"""GALERA_IMAGE through scripts/images: the image galera-node1..3 run. A fake `docker` on PATH answers
as the Docker CLI does (docker/cli, cli/command/image/inspect.go: "Error: No such image: NAME" on
stderr and exit 1 for an image the engine lacks; a pull without a registry fails with the daemon's
"Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup
registry-1.docker.io ...: no such host"); the engine here holds the images listed in HAVE."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKER = """#!/bin/bash
case "$1 $2" in
  "image inspect")
    if grep -qxF -- "$3" "$HAVE"; then echo '[{"Id": "sha256:0"}]'; exit 0; fi
    echo "Error: No such image: $3" >&2; exit 1 ;;
  "pull -q"*|"pull "*)
    echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.1:53: no such host' >&2
    exit 1 ;;
esac
echo "fake docker: unexpected $*" >&2; exit 3
"""


@pytest.fixture
def engine(tmp_path):
    # A checkout of its own (scripts copied, the rest linked): scripts/env.sh tidies the checkout's
    # .cache, which must not be the running lab's.
    root = tmp_path / "checkout"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".cache", ".env", "scripts"):
            (root / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "scripts", root / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(DOCKER)
    (bin_dir / "docker").chmod(0o755)
    have = tmp_path / "have"

    def images(galera_image: str, *present: str) -> subprocess.CompletedProcess:
        have.write_text("\n".join(["mysql:8.4", "mariadb:11.4", "debian:bookworm-slim", *present]) + "\n")
        env_file = tmp_path / ".env"
        env_file.write_text(f"GALERA_IMAGE={galera_image}\n")
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HAVE": str(have),
               "LAGLAB_ENV_FILE": str(env_file), "PROFILE": "galera"}  # fmt: skip
        env.pop("GALERA_IMAGE", None)
        done = subprocess.run([str(root / "scripts/images")], env=env, capture_output=True, text=True, timeout=60)
        done.env_text = env_file.read_text()
        return done

    return images


def test_percona_xtradb_cluster_is_run_when_the_engine_has_it(engine):
    done = engine("percona/percona-xtradb-cluster:8.0", "percona/percona-xtradb-cluster:8.0")
    assert done.returncode == 0, done.stderr
    assert "RESOLVED_GALERA_IMAGE=percona/percona-xtradb-cluster:8.0\n" in done.env_text


def test_percona_xtradb_cluster_that_cannot_be_had_is_said_with_the_way_out(engine):
    done = engine("percona/percona-xtradb-cluster:5.7")
    assert done.returncode != 0
    assert "GALERA_IMAGE=percona/percona-xtradb-cluster:5.7 is not here and cannot be pulled" in done.stderr
    assert "no such host" in done.stderr  # the engine's own reason
    assert "Debian carries no Percona XtraDB Cluster" in done.stderr and "leave GALERA_IMAGE empty" in done.stderr
    assert "RESOLVED_GALERA_IMAGE" not in done.env_text


def test_empty_galera_image_is_the_labs_mariadb(engine):
    done = engine("")
    assert done.returncode == 0, done.stderr
    assert "RESOLVED_MARIADB_IMAGE=mariadb:11.4\n" in done.env_text and "RESOLVED_GALERA_IMAGE" not in done.env_text
