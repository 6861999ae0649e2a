# Sourced by the lab's scripts: messages, the validated configuration, the resolved-images block.
# shellcheck shell=bash

say() { printf 'laglab: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

ROOT=$(pwd)
ENV_FILE=${LAGLAB_ENV_FILE:-$ROOT/.env}
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || die "python3 is needed on the host (3.11 or newer)"

# Validated configuration as shell variables (python -m laglab.config is the one parser).
load_config() {
  local out
  out=$(PYTHONPATH="$ROOT/controller" "$PYTHON" -m laglab.config check --env-file "$ENV_FILE" "$@") || exit 2
  # Exported, every one: the scripts and tools started from here (./laglab, bench-*, compose)
  # must see what .env says, LAB_API_TOKEN included, and which env file that was.
  set -a
  eval "$out"
  set +a
  export LAGLAB_ENV_FILE=$ENV_FILE
}

# The block at the end of .env that records what `make up` resolved (images actually used).
RESOLVED_MARK='# --- resolved by make up: images in use here (edit the variables above instead) ---'
write_resolved() { # KEY VALUE [KEY VALUE ...]
  local tmp
  tmp=$(mktemp)
  [ -f "$ENV_FILE" ] && sed "/^$(printf '%s' "$RESOLVED_MARK" | sed 's/[][\.*^$/]/\\&/g')\$/,\$d" "$ENV_FILE" >"$tmp"
  {
    echo "$RESOLVED_MARK"
    while [ $# -gt 0 ]; do
      printf '%s=%s\n' "$1" "$2"
      shift 2
    done
  } >>"$tmp"
  cat "$tmp" >"$ENV_FILE"
  rm -f "$tmp"
}

load_config

# .env's LAB_TCP_WMEM / LAB_TCP_RMEM as compose sysctls of the services that carry the lab's streams
# (an override file, so that unset they stay the host's own values; validated and normalised to bytes
# by laglab.config above).
TCP_BUFFERS_FILE=$ROOT/.cache/compose.tcp-buffers.yaml
tcp_buffers_file() {
  if [ -z "${LAB_TCP_WMEM:-}${LAB_TCP_RMEM:-}" ]; then
    rm -f "$TCP_BUFFERS_FILE"
    return 0
  fi
  mkdir -p "$(dirname "$TCP_BUFFERS_FILE")"
  local tmp
  tmp=$(mktemp "$TCP_BUFFERS_FILE.XXXXXX")
  {
    echo "# written by make up from .env's LAB_TCP_WMEM / LAB_TCP_RMEM: do not edit"
    echo "services:"
    for service in mysql-source mysql-target loadgen gr-node1 gr-node2 gr-node3 galera-node1 galera-node2 galera-node3; do
      echo "  $service:"
      echo "    sysctls:"
      [ -z "${LAB_TCP_WMEM:-}" ] || echo "      net.ipv4.tcp_wmem: \"$LAB_TCP_WMEM\""
      [ -z "${LAB_TCP_RMEM:-}" ] || echo "      net.ipv4.tcp_rmem: \"$LAB_TCP_RMEM\""
    done
  } >"$tmp"
  mv -f "$tmp" "$TCP_BUFFERS_FILE" # whole, for a compose started beside this one
}
tcp_buffers_file

# docker compose for this checkout and env file, wherever it is called from.
compose() {
  local files=(-f "$ROOT/compose.yaml")
  [ ! -f "$TCP_BUFFERS_FILE" ] || files+=(-f "$TCP_BUFFERS_FILE")
  docker compose --project-directory "$ROOT" "${files[@]}" --env-file "$ENV_FILE" "$@"
}
