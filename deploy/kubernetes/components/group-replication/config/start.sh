#!/bin/sh
# Entrypoint of gr-nodeN: the node's own and the .env-driven Group Replication options, then the
# image's entrypoint (official mysql image or the laglab stand-in) with the server. GR_IP_ALLOWLIST:
# the addresses XCom accepts members from (unset: AUTOMATIC, each interface's own subnet, which is
# the lab's one network on Docker; on Kubernetes a pod's subnet is its node's, so it is set there).
set -eu
n=${GR_NODE:?GR_NODE (1..3) is not set}
exec docker-entrypoint.sh mysqld \
  --server-id="$((10 + n))" \
  --report-host="gr-node$n" \
  --loose-group-replication-local-address="gr-node$n:33061" \
  --loose-group-replication-group-name="${GR_GROUP_NAME:?}" \
  --loose-group-replication-member-expel-timeout="${GR_EXPEL_TIMEOUT:-5}" \
  --loose-group-replication-unreachable-majority-timeout="${GR_UNREACHABLE_MAJORITY_TIMEOUT:-0}" \
  --loose-group-replication-autorejoin-tries="${GR_AUTOREJOIN_TRIES:-3}" \
  --loose-group-replication-consistency="${GR_CONSISTENCY:-EVENTUAL}" \
  ${GR_IP_ALLOWLIST:+"--loose-group-replication-ip-allowlist=$GR_IP_ALLOWLIST"} \
  "$@"
