#!/bin/bash
# Entrypoint of galera-nodeN: wsrep options from .env, then the image's entrypoint (official mariadb
# image or the laglab stand-in) with the server.
#
# Bootstrap: node 1 starts a new cluster on its first start (no grastate.dat yet). Later it joins
# whichever peer answers; if none does (the whole cluster was stopped), it bootstraps again, marking
# its state safe to bootstrap: in a lab, availability after `make down && make up` beats keeping
# transactions that only a node stopped later had.
set -euo pipefail
n=${GALERA_NODE:?GALERA_NODE (1..3) is not set}
IFS=, read -r -a segments <<<"${GALERA_SEGMENTS:-0,0,0}"
segment=${segments[$((n - 1))]:-0}
provider=/usr/lib/galera/libgalera_smm.so
[ -f "$provider" ] || provider=/usr/lib/libgalera_smm.so
address=$(hostname -i | awk '{print $1}')
options="evs.suspect_timeout=${GALERA_SUSPECT_TIMEOUT:-PT5S};evs.inactive_timeout=${GALERA_INACTIVE_TIMEOUT:-PT15S};gmcast.segment=$segment"
args=(
  --wsrep-on=ON --wsrep-provider="$provider" --wsrep-cluster-name=laglab
  --wsrep-cluster-address=gcomm://galera-node1,galera-node2,galera-node3
  --wsrep-node-name="galera-node$n" --wsrep-node-address="$address"
  --wsrep-sst-method="${GALERA_SST_METHOD:-mariabackup}" --wsrep-provider-options="$options"
  --server-id="$((20 + n))"
)
# mariabackup state transfer runs on the donor as root (over its socket).
[ "${GALERA_SST_METHOD:-mariabackup}" = mariabackup ] && args+=(--wsrep-sst-auth="root:${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}")

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
exec docker-entrypoint.sh mariadbd "${args[@]}" "$@"
