#!/bin/sh
# Entrypoint of gr-nodeN: the node's own and the .env-driven Group Replication options, then the
# image's entrypoint (official mysql image or the laglab stand-in) with the server.
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
  "$@"
