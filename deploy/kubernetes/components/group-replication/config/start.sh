#!/bin/sh
# Entrypoint of gr-nodeN: the node's own and the .env-driven Group Replication options, then the
# image's entrypoint (official mysql image or the laglab stand-in) with the server. GR_IP_ALLOWLIST:
# the addresses XCom accepts members from (unset: AUTOMATIC, each interface's own subnet, which is
# the lab's one network on Docker; on Kubernetes a pod's subnet is its node's, so it is set there).
#
# The options are --loose- (a server that lacks one would only warn), so what this server's version
# lacks is checked here, by its own `mysqld --version`: a setting it cannot honour stops the node with
# the version that brings it, instead of being ignored. MySQL's manual: ip_allowlist 8.0.22 (before:
# ip_whitelist), member_expel_timeout 8.0.13, consistency 8.0.14, autorejoin_tries 8.0.16.
set -eu
n=${GR_NODE:?GR_NODE (1..3) is not set}
version=$(mysqld --version 2>/dev/null | sed -n 's/.*Ver \([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
at_least() { # major minor patch: is this server that version or newer?
  [ "$(echo "$version" | awk -F. -v want="$1 $2 $3" '{ split(want, w, " ")
    print ($1 * 1000000 + $2 * 1000 + $3 >= w[1] * 1000000 + w[2] * 1000 + w[3]) ? "yes" : "no" }')" = yes ]
}
needs() { # setting, value, its default, major minor patch
  if [ "$2" != "$3" ] && [ -n "$version" ] && ! at_least "$4" "$5" "$6"; then
    echo "gr-node$n: $1=$2 needs MySQL $4.$5.$6 or newer; this server is $version (unset it to run with $3)" >&2
    exit 1
  fi
}
needs GR_EXPEL_TIMEOUT "${GR_EXPEL_TIMEOUT:-5}" 5 8 0 13
needs GR_CONSISTENCY "${GR_CONSISTENCY:-EVENTUAL}" EVENTUAL 8 0 14
needs GR_AUTOREJOIN_TRIES "${GR_AUTOREJOIN_TRIES:-3}" 3 8 0 16
allowlist=ip-allowlist
if [ -n "$version" ] && ! at_least 8 0 22; then allowlist=ip-whitelist; fi
exec docker-entrypoint.sh mysqld \
  --server-id="$((10 + n))" \
  --report-host="gr-node$n" \
  --loose-group-replication-local-address="gr-node$n:33061" \
  --loose-group-replication-group-name="${GR_GROUP_NAME:?}" \
  --loose-group-replication-member-expel-timeout="${GR_EXPEL_TIMEOUT:-5}" \
  --loose-group-replication-unreachable-majority-timeout="${GR_UNREACHABLE_MAJORITY_TIMEOUT:-0}" \
  --loose-group-replication-autorejoin-tries="${GR_AUTOREJOIN_TRIES:-3}" \
  --loose-group-replication-consistency="${GR_CONSISTENCY:-EVENTUAL}" \
  ${GR_IP_ALLOWLIST:+"--loose-group-replication-$allowlist=$GR_IP_ALLOWLIST"} \
  "$@"
