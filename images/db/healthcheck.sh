#!/bin/bash
# The official mariadb image's healthcheck.sh, reduced to the checks laglab uses:
#   --connect              the server answers over TCP
#   --innodb_initialized   InnoDB has finished starting
# Credentials: MARIADB_ROOT_PASSWORD / MYSQL_ROOT_PASSWORD.
set -eo pipefail
pw=${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}
if command -v mariadb >/dev/null 2>&1; then client=mariadb; else client=mysql; fi
run() { MYSQL_PWD=$pw "$client" -uroot -h127.0.0.1 --protocol=tcp -N -B -e "$1"; }
[ $# -gt 0 ] || set -- --connect
for check in "$@"; do
  case "$check" in
    --connect) run 'SELECT 1' >/dev/null ;;
    --innodb_initialized)
      [ "$(run "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE='InnoDB' AND SUPPORT IN ('YES','DEFAULT')")" = 1 ] ;;
    *) echo "healthcheck.sh: unknown check $check" >&2; exit 2 ;;
  esac
done
