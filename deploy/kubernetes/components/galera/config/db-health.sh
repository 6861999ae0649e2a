#!/bin/sh
# Healthcheck of the lab's database services, for the official images and the stand-ins alike.
#   db-health.sh          the server answers over TCP
#   db-health.sh replica  ... and both replication threads are running
#   db-health.sh galera   ... and the node is Synced with its cluster
set -eu
if command -v mariadb >/dev/null 2>&1; then client=mariadb; else client=mysql; fi
export MYSQL_PWD="${MYSQL_ROOT_PASSWORD:-${MARIADB_ROOT_PASSWORD:-}}"
case "${1:-}" in
  replica) ;;
  galera)
    state=$("$client" -uroot -h127.0.0.1 --protocol=tcp -N -B -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'" | cut -f2)
    [ "$state" = Synced ] || { echo "galera node is ${state:-not a member}"; exit 1; }
    exit 0 ;;
  *) exec "$client" -uroot -h127.0.0.1 --protocol=tcp -N -B -e 'SELECT 1' >/dev/null ;;
esac
# SHOW REPLICA STATUS from MySQL 8.0.22 (the only form from 8.4) and MariaDB 10.5; SHOW SLAVE STATUS before.
status=$("$client" -uroot -h127.0.0.1 --protocol=tcp --vertical -e 'SHOW REPLICA STATUS' 2>/dev/null ||
  "$client" -uroot -h127.0.0.1 --protocol=tcp --vertical -e 'SHOW SLAVE STATUS')
echo "$status" | grep -Eq '(Replica|Slave)_IO_Running: Yes' || { echo "replica IO thread not running"; exit 1; }
echo "$status" | grep -Eq '(Replica|Slave)_SQL_Running: Yes' || { echo "replica SQL thread not running"; exit 1; }
