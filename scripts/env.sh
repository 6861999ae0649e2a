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

# docker compose for this checkout and env file, wherever it is called from.
compose() { docker compose --project-directory "$ROOT" -f "$ROOT/compose.yaml" --env-file "$ENV_FILE" "$@"; }
