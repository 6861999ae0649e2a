#!/bin/bash
# Entrypoint of galera-nodeN: wsrep options from .env, then the image's entrypoint with the server:
# MariaDB (official image or the laglab stand-in: docker-entrypoint.sh mariadbd) or Percona XtraDB
# Cluster 5.7 / 8.0 (GALERA_IMAGE=percona/percona-xtradb-cluster:..., told apart by `mysqld --version`:
# /entrypoint.sh mysqld, as percona/percona-docker's percona-xtradb-cluster-{5.7,8.0}/Dockerfile name it).
#
# Bootstrap: node 1 starts a new cluster on its first start (no grastate.dat yet). Later it joins
# whichever peer answers; if none does (the whole cluster was stopped), it bootstraps again, marking
# its state safe to bootstrap: in a lab, availability after `make down && make up` beats keeping
# transactions that only a node stopped later had.
set -euo pipefail
n=${GALERA_NODE:?GALERA_NODE (1..3) is not set}
IFS=, read -r -a segments <<<"${GALERA_SEGMENTS:-0,0,0}"
segment=${segments[$((n - 1))]:-0}
# MariaDB's galera-4 (Debian, official image); PXC 8.0's galera4 and 5.7's galera3 (their node.cnf).
for provider in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib64/galera4/libgalera_smm.so \
  /usr/lib64/galera3/libgalera_smm.so; do
  [ -f "$provider" ] && break
done
# "mysqld  Ver 8.0.40-31.1 for Linux on x86_64 (Percona XtraDB Cluster (GPL), Release rel31, ...)"
pxc=
if command -v mysqld >/dev/null 2>&1; then
  server_version=$(mysqld --version 2>/dev/null || true)
  case "$server_version" in *"XtraDB Cluster"*) pxc=$(sed -nE 's/.* Ver ([0-9]+\.[0-9]+).*/\1/p' <<<"$server_version") ;; esac
fi
sst=${GALERA_SST_METHOD:-mariabackup}
if [ -n "$pxc" ]; then
  # PXC's SST is Percona XtraBackup (xtrabackup-v2); 8.0 has no rsync SST (PXC 8.0 docs, "State
  # snapshot transfer": xtrabackup-v2 is the only method).
  case "$sst" in
    mariabackup) sst=xtrabackup-v2 ;;
    rsync) if [ "$pxc" != 5.7 ]; then
      echo "galera-node$n: GALERA_SST_METHOD=rsync: Percona XtraDB Cluster $pxc has no rsync state transfer (xtrabackup-v2 only); leave GALERA_SST_METHOD at mariabackup, which is xtrabackup-v2 on PXC" >&2
      exit 1
    fi ;;
  esac
fi
address=$(hostname -i | awk '{print $1}')
options="evs.suspect_timeout=${GALERA_SUSPECT_TIMEOUT:-PT5S};evs.inactive_timeout=${GALERA_INACTIVE_TIMEOUT:-PT15S};gmcast.segment=$segment"
args=(
  --wsrep-on=ON --wsrep-provider="$provider" --wsrep-cluster-name=laglab
  --wsrep-cluster-address=gcomm://galera-node1,galera-node2,galera-node3
  --wsrep-node-name="galera-node$n" --wsrep-node-address="$address"
  --wsrep-sst-method="$sst" --wsrep-provider-options="$options"
  --server-id="$((20 + n))"
)
# mariabackup state transfer runs on the donor as root (over its socket). PXC 5.7's xtrabackup-v2 as
# the xtrabackup@localhost its entrypoint creates (XTRABACKUP_PASSWORD, default xtrabackup); PXC 8.0
# needs no account (its internal mysql.pxc.sst.role). PXC 8.0 encrypts cluster traffic by default with
# certificates each container makes for itself, which its peers then refuse: off in the lab.
if [ "$sst" = mariabackup ]; then
  args+=(--wsrep-sst-auth="root:${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}")
elif [ "$pxc" = 5.7 ] && [ "$sst" = xtrabackup-v2 ]; then
  args+=(--wsrep-sst-auth="xtrabackup:${XTRABACKUP_PASSWORD:-xtrabackup}")
fi
[ -n "$pxc" ] && [ "$pxc" != 5.7 ] && args+=(--pxc-encrypt-cluster-traffic=OFF)

peer_answers() {
  local peer
  for peer in galera-node1 galera-node2 galera-node3; do
    [ "$peer" = "galera-node$n" ] && continue
    timeout 2 bash -c "exec 3<>/dev/tcp/$peer/4567" 2>/dev/null && return 0
  done
  return 1
}

state=${GALERA_STATE_FILE:-/var/lib/mysql/grastate.dat}  # (overridable for the unit test)
if [ "$n" = 1 ]; then
  if [ ! -s "$state" ]; then
    echo "galera-node1: first start, bootstrapping a new cluster"
    args+=(--wsrep-new-cluster)
  elif ! peer_answers; then
    echo "galera-node1: no peer answers, bootstrapping the cluster again"
    sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$state"
    args+=(--wsrep-new-cluster)
  fi
fi
if [ -n "$pxc" ]; then
  # PXC's entrypoint initialises a datadir only when CLUSTER_JOIN is empty; a joining node's comes by
  # state transfer from the cluster.
  [ "$n" = 1 ] || export CLUSTER_JOIN=galera-node1,galera-node2,galera-node3
  exec "${GALERA_PXC_ENTRYPOINT:-/entrypoint.sh}" mysqld "${args[@]}" "$@"
fi
exec docker-entrypoint.sh mariadbd "${args[@]}" "$@"
