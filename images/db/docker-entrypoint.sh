#!/bin/bash
# Entrypoint of the laglab stand-in images: the official mysql/mariadb images' contract, condensed.
# On an empty datadir: initialise, start a temporary server with networking off, set the root
# password and MYSQL_ROOT_HOST account, create MYSQL_DATABASE and MYSQL_USER, run
# /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz}, stop. Then exec the server.
set -eo pipefail

log() { printf '%s [Entrypoint]: %s\n' "$(date -u +%FT%TZ)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

if command -v mariadbd >/dev/null 2>&1; then
  FLAVOR=mariadb SERVER=mariadbd CLIENT=mariadb ADMIN=mariadb-admin
else
  FLAVOR=mysql SERVER=mysqld CLIENT=mysql ADMIN=mysqladmin
fi

# MariaDB's image reads MARIADB_* first and accepts MYSQL_*; the mysql image reads MYSQL_*.
env_of() { # name without prefix
  local m="MARIADB_$1" y="MYSQL_$1"
  if [ "$FLAVOR" = mariadb ] && [ -n "${!m:-}" ]; then printf '%s' "${!m}"; else printf '%s' "${!y:-}"; fi
}

if [ "${1:0:1}" = - ]; then set -- "$SERVER" "$@"; fi
if [ "$1" = mysqld ] || [ "$1" = mariadbd ]; then set -- "$SERVER" "${@:2}"; fi
[ "$1" = "$SERVER" ] || exec "$@"

DATADIR=/var/lib/mysql
SOCKET=/var/run/mysqld/mysqld.sock
mkdir -p /var/run/mysqld "$DATADIR"
chown mysql:mysql /var/run/mysqld "$DATADIR"

sql_escape() { printf '%s' "$1" | sed -e "s/\\\\/\\\\\\\\/g" -e "s/'/\\\\'/g"; }

if [ ! -d "$DATADIR/mysql" ]; then
  ROOT_PASSWORD=$(env_of ROOT_PASSWORD)
  ALLOW_EMPTY=$(env_of ALLOW_EMPTY_PASSWORD)
  [ "$FLAVOR" = mariadb ] && [ -n "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" ] && ALLOW_EMPTY=$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD
  RANDOM_ROOT=$(env_of RANDOM_ROOT_PASSWORD)
  [ "$FLAVOR" = mariadb ] && [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ] && RANDOM_ROOT=$MARIADB_RANDOM_ROOT_PASSWORD
  if [ -z "$ROOT_PASSWORD" ] && [ -z "$ALLOW_EMPTY" ] && [ -z "$RANDOM_ROOT" ]; then
    die "database is uninitialized and the root password option is not specified
    You need to specify one of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD and MYSQL_RANDOM_ROOT_PASSWORD"
  fi
  if [ -n "$RANDOM_ROOT" ]; then
    ROOT_PASSWORD=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)
    log "GENERATED ROOT PASSWORD: $ROOT_PASSWORD"
  fi
  ROOT_HOST=$(env_of ROOT_HOST)
  ROOT_HOST=${ROOT_HOST:-%}
  DATABASE=$(env_of DATABASE)
  USER_NAME=$(env_of USER)
  USER_PASSWORD=$(env_of PASSWORD)

  log "initializing database files ($FLAVOR)"
  if [ "$FLAVOR" = mariadb ]; then
    # --skip-log-bin: 10.5's bootstrap wrote its system tables to the binary log under the lab's
    # log-bin and server-id (41 transactions 0-2-1..41 on mysql-target), which gtid_strict_mode then
    # set against the source's 0-1-1; 10.11 and 11.8 log nothing there. Passed through to the server.
    mariadb-install-db --user=mysql --datadir="$DATADIR" --skip-test-db \
      --auth-root-authentication-method=normal --rpm --skip-log-bin >/dev/null
  else
    mysqld --initialize-insecure --user=mysql --datadir="$DATADIR"
  fi

  log "starting a temporary server"
  temp=(--skip-networking --socket="$SOCKET")
  # A Galera node's temporary server must not join its cluster (the official image does the same).
  [ "$FLAVOR" = mariadb ] && temp+=(--wsrep_on=OFF)
  "$@" "${temp[@]}" &
  pid=$!
  for _ in $(seq 60); do
    "$ADMIN" --socket="$SOCKET" -uroot ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "the temporary server did not start"
    sleep 1
  done
  client=("$CLIENT" --protocol=socket --socket="$SOCKET" -uroot)

  pw=$(sql_escape "$ROOT_PASSWORD")
  {
    echo "SET @@SESSION.SQL_LOG_BIN=0;"
    if [ "$FLAVOR" = mariadb ]; then
      # mariadb-install-db adds password-less root accounts that would shadow root@'%'.
      echo "DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1', 'root'@'$(hostname)';"
    fi
    echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$pw';"
    if [ "$ROOT_HOST" != localhost ]; then
      echo "CREATE USER IF NOT EXISTS 'root'@'$(sql_escape "$ROOT_HOST")' IDENTIFIED BY '$pw';"
      echo "GRANT ALL ON *.* TO 'root'@'$(sql_escape "$ROOT_HOST")' WITH GRANT OPTION;"
    fi
    [ -n "$DATABASE" ] && echo "CREATE DATABASE IF NOT EXISTS \`$DATABASE\`;"
    if [ -n "$USER_NAME" ] && [ -n "$USER_PASSWORD" ]; then
      echo "CREATE USER '$(sql_escape "$USER_NAME")'@'%' IDENTIFIED BY '$(sql_escape "$USER_PASSWORD")';"
      [ -n "$DATABASE" ] && echo "GRANT ALL ON \`$DATABASE\`.* TO '$(sql_escape "$USER_NAME")'@'%';"
    fi
    echo "FLUSH PRIVILEGES;"
  } | "${client[@]}"
  [ -n "$ROOT_PASSWORD" ] && client+=(--password="$ROOT_PASSWORD")
  [ -n "$DATABASE" ] && client+=("$DATABASE")

  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) log "running $f"; if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) log "running $f"; "${client[@]}" <"$f" ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | "${client[@]}" ;;
      *.sql.xz) log "running $f"; xzcat "$f" | "${client[@]}" ;;
      *) [ -e "$f" ] && log "ignoring $f" ;;
    esac
  done

  log "stopping the temporary server"
  "$ADMIN" --socket="$SOCKET" -uroot ${ROOT_PASSWORD:+--password="$ROOT_PASSWORD"} shutdown
  wait "$pid" || true
  log "init process done; ready for start up"
fi

exec "$@"
