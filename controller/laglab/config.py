"""The lab's configuration: one table of variables, parsed and validated in one place.

Used twice: by `make up`'s preflight (`python3 -m laglab.config check`, standard library only, so
it runs on the host before anything is installed) and by the controller at start. Values come from
the process environment first, then `.env`, then the defaults below (compose's own precedence).
"""

from __future__ import annotations

import argparse
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path


class ConfigError(ValueError):
    """A variable has a value the lab cannot use; the message names the variable."""

    def __init__(self, variable: str, message: str):
        super().__init__(f"{variable}: {message}")
        self.variable = variable


FLAVORS = ("mysql", "mariadb")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,32}$")
_PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def _flavor(name: str, value: str) -> str:
    if value not in FLAVORS:
        raise ConfigError(name, f"{value!r} is not a known flavour; use one of {', '.join(FLAVORS)}")
    return value


def _choice(allowed: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(name: str, value: str) -> str:
        if value not in allowed:
            raise ConfigError(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def _int_range(low: int, high: int) -> Callable[[str, str], int]:
    def parse(name: str, value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(name, f"{value!r} is not a whole number") from None
        if not low <= number <= high:
            raise ConfigError(name, f"{number} is out of range {low}..{high}")
        return number

    return parse


def _image(name: str, value: str) -> str:
    if not _IMAGE_RE.match(value):
        raise ConfigError(name, f"{value!r} is not an image reference")
    return value


def _optional_image(name: str, value: str) -> str:
    return value and _image(name, value)


def _identifier(name: str, value: str) -> str:
    if not _NAME_RE.match(value):
        raise ConfigError(name, f"{value!r} must be 1-32 letters, digits or underscores")
    return value


def _password(name: str, value: str) -> str:
    if not value:
        raise ConfigError(name, "must not be empty")
    if any(c in value for c in "'\"\\`$\n"):
        raise ConfigError(name, "must not contain quotes, backslashes, backticks, $ or newlines")
    return value


def _project(name: str, value: str) -> str:
    if not _PROJECT_RE.match(value):
        raise ConfigError(name, f"{value!r} must be lower-case letters, digits, - or _")
    return value


def _bind(name: str, value: str) -> str:
    try:
        socket.inet_aton(value)
    except OSError:
        raise ConfigError(name, f"{value!r} is not an IPv4 address") from None
    return value


def _hosts(name: str, value: str) -> str:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", n)]
    if bad:
        raise ConfigError(name, f"{bad[0]!r} is not a host name or address")
    return ",".join(names)


def _text(name: str, value: str) -> str:
    return value


def _token(name: str, value: str) -> str:
    # Empty: the controller makes one (make up writes one into .env first). A short one is guessable.
    if value and (len(value) < 16 or not re.fullmatch(r"[A-Za-z0-9._~+/=-]+", value)):
        raise ConfigError(name, "must be at least 16 letters, digits or ._~+/=- (make up writes a random one)")
    return value


def _uuid(name: str, value: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", value):
        raise ConfigError(name, f"{value!r} is not a lower-case UUID")
    return value


def _iso_duration(name: str, value: str) -> str:
    # Galera's evs.* timeouts: ISO 8601 durations such as PT5S, PT1M30S, PT0.5S.
    if not re.fullmatch(r"PT(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?", value):
        raise ConfigError(name, f"{value!r} is not an ISO 8601 duration like PT5S or PT1M30S")
    return value


def _segments(name: str, value: str) -> str:
    parts = value.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) <= 255 for p in parts):
        raise ConfigError(name, f"{value!r} must be three segment numbers 0..255, one per node, e.g. 0,0,1")
    return ",".join(p.strip() for p in parts)


def _tcp_buffer(name: str, value: str) -> str:
    """net.ipv4.tcp_wmem / tcp_rmem as sysctl writes them ('min default max'; sizes may carry KiB, MiB),
    normalised to bytes; empty: the host's own values."""
    from laglab.shaping.tcp_buffers import BufferError, parse, text  # standard library only

    if not value.strip():
        return ""
    try:
        return text(parse(name, value))
    except BufferError as error:
        raise ConfigError(name, error.message) from None


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    parse: Callable[[str, str], object]
    doc: str
    port: bool = False
    profile: str | None = None  # published only when this profile runs


VARIABLES: tuple[Variable, ...] = (
    Variable("COMPOSE_PROJECT_NAME", "laglab", _project, "compose project name; labels every container"),
    Variable("DB_FLAVOR", "mysql", _flavor, "mysql or mariadb"),
    Variable("MYSQL_IMAGE", "mysql:8.4", _image, "server image when DB_FLAVOR=mysql"),
    Variable("MARIADB_IMAGE", "mariadb:11.4", _image, "server image when DB_FLAVOR=mariadb"),
    Variable(
        "STANDINS",
        "yes",
        _choice(("yes", "no")),
        "no: make up stops where a server image cannot be had, instead of building Debian's stand-in",
    ),
    Variable(
        "SOURCE_IMAGE",
        "",
        _optional_image,
        "mysql-source's own image (one flavour with TARGET_IMAGE: a cross-version pair); empty: the flavour's",
    ),
    Variable("TARGET_IMAGE", "", _optional_image, "mysql-target's own image; empty: the flavour's"),
    Variable("BASE_IMAGE", "debian:bookworm-slim", _image, "base of the controller and loadgen images"),
    Variable("MYSQL_ROOT_PASSWORD", "laglab", _password, "root password of both servers"),
    Variable("LAB_DATABASE", "lab", _identifier, "schema for load (sysbench, tests)"),
    Variable("LAB_USER", "lab", _identifier, "account with all rights on LAB_DATABASE"),
    Variable("LAB_PASSWORD", "lab", _password, "its password"),
    Variable("REPL_USER", "repl", _identifier, "replication account"),
    Variable("REPL_PASSWORD", "repl", _password, "its password"),
    Variable("CONTROLLER_BIND", "127.0.0.1", _bind, "host address the controller is published on"),
    Variable("CONTROLLER_PORT", "8080", _int_range(1, 65535), "controller API port", port=True),
    Variable("SOURCE_PORT", "13306", _int_range(1, 65535), "mysql-source on 127.0.0.1", port=True),
    Variable("TARGET_PORT", "13307", _int_range(1, 65535), "mysql-target on 127.0.0.1", port=True),
    Variable("HEARTBEAT_INTERVAL_MS", "100", _int_range(10, 60000), "heartbeat write/sample period"),
    Variable("LAG_WINDOW_SECONDS", "900", _int_range(1, 86400), "samples kept in memory for /api/lag"),
    Variable(
        "LAB_API_TOKEN",
        "",
        _token,
        "the API requires 'Authorization: Bearer <token>'; make up writes a random one here when empty",
    ),
    Variable(
        "CONTROLLER_HOSTS",
        "",
        _hosts,
        "extra host names the API answers to (comma-separated; 127.0.0.1, localhost and CONTROLLER_BIND always)",
    ),
    Variable(
        "SHAPING_BACKEND",
        "auto",
        _choice(("auto", "kernel", "userspace", "chaos-mesh", "daemonset")),
        "auto, kernel, userspace; on Kubernetes chaos-mesh or daemonset (the laglab shaper on each node)",
    ),
    Variable(
        "LAB_PLATFORM",
        "auto",
        _choice(("auto", "docker", "kubernetes")),
        "where the services run: auto (kubernetes in a pod with a service account, else docker)",
    ),
    Variable("LAB_TCP_WMEM", "", _tcp_buffer, "net.ipv4.tcp_wmem of the servers and loadgen; empty: the host's"),
    Variable("LAB_TCP_RMEM", "", _tcp_buffer, "net.ipv4.tcp_rmem of the servers and loadgen; empty: the host's"),
    Variable("CLEAR_SHAPING_ON_EXIT", "1", _choice(("0", "1")), "1: a stopping controller clears its shaping"),
    Variable("EXTRA_CA_BUNDLE", "", _text, "CA bundle for pip inside image builds (TLS proxies)"),
    # Profiles (make up PROFILE=...): semi-sync, group-replication, galera.
    Variable("SEMI_SYNC_TIMEOUT_MS", "10000", _int_range(1, 3_600_000), "semi-sync: wait for an ack this long"),
    Variable("GR_GROUP_NAME", "6f1a4c2e-6d1b-4b8e-9d1e-1a2b3c4d5e6f", _uuid, "group_replication_group_name"),
    Variable("GR_EXPEL_TIMEOUT", "5", _int_range(0, 3600), "group_replication_member_expel_timeout (s)"),
    Variable("GR_UNREACHABLE_MAJORITY_TIMEOUT", "0", _int_range(0, 31_536_000), "..._unreachable_majority_timeout (s)"),
    Variable("GR_AUTOREJOIN_TRIES", "3", _int_range(0, 2016), "group_replication_autorejoin_tries"),
    Variable(
        "GR_CONSISTENCY",
        "EVENTUAL",
        _choice(("EVENTUAL", "BEFORE_ON_PRIMARY_FAILOVER", "BEFORE", "AFTER", "BEFORE_AND_AFTER")),
        "group_replication_consistency",
    ),
    Variable(
        "GR_NODE1_PORT", "13311", _int_range(1, 65535), "gr-node1 on 127.0.0.1", port=True, profile="group-replication"
    ),
    Variable(
        "GR_NODE2_PORT", "13312", _int_range(1, 65535), "gr-node2 on 127.0.0.1", port=True, profile="group-replication"
    ),
    Variable(
        "GR_NODE3_PORT", "13313", _int_range(1, 65535), "gr-node3 on 127.0.0.1", port=True, profile="group-replication"
    ),
    Variable(
        "GALERA_IMAGE",
        "",
        _optional_image,
        "galera-node1..3's image: empty, the MariaDB image; percona/percona-xtradb-cluster:5.7|8.0 for PXC",
    ),
    Variable("GALERA_SUSPECT_TIMEOUT", "PT5S", _iso_duration, "evs.suspect_timeout (ISO 8601)"),
    Variable("GALERA_INACTIVE_TIMEOUT", "PT15S", _iso_duration, "evs.inactive_timeout (ISO 8601)"),
    Variable("GALERA_SEGMENTS", "0,0,0", _segments, "gmcast.segment of galera-node1,2,3"),
    Variable("GALERA_SST_METHOD", "mariabackup", _choice(("mariabackup", "rsync")), "wsrep_sst_method"),
    Variable(
        "GALERA_NODE1_PORT", "13321", _int_range(1, 65535), "galera-node1 on 127.0.0.1", port=True, profile="galera"
    ),
    Variable(
        "GALERA_NODE2_PORT", "13322", _int_range(1, 65535), "galera-node2 on 127.0.0.1", port=True, profile="galera"
    ),
    Variable(
        "GALERA_NODE3_PORT", "13323", _int_range(1, 65535), "galera-node3 on 127.0.0.1", port=True, profile="galera"
    ),
)
BY_NAME = {v.name: v for v in VARIABLES}


@dataclass(frozen=True)
class Settings:
    """Validated configuration: one typed attribute per variable of VARIABLES, parsed once by load()
    (a unit test holds the attributes and their types in step with the table)."""

    COMPOSE_PROJECT_NAME: str
    DB_FLAVOR: str
    MYSQL_IMAGE: str
    MARIADB_IMAGE: str
    STANDINS: str
    SOURCE_IMAGE: str
    TARGET_IMAGE: str
    BASE_IMAGE: str
    MYSQL_ROOT_PASSWORD: str
    LAB_DATABASE: str
    LAB_USER: str
    LAB_PASSWORD: str
    REPL_USER: str
    REPL_PASSWORD: str
    CONTROLLER_BIND: str
    CONTROLLER_PORT: int
    SOURCE_PORT: int
    TARGET_PORT: int
    HEARTBEAT_INTERVAL_MS: int
    LAG_WINDOW_SECONDS: int
    LAB_API_TOKEN: str
    CONTROLLER_HOSTS: str
    SHAPING_BACKEND: str
    LAB_PLATFORM: str
    LAB_TCP_WMEM: str
    LAB_TCP_RMEM: str
    CLEAR_SHAPING_ON_EXIT: str
    EXTRA_CA_BUNDLE: str
    SEMI_SYNC_TIMEOUT_MS: int
    GR_GROUP_NAME: str
    GR_EXPEL_TIMEOUT: int
    GR_UNREACHABLE_MAJORITY_TIMEOUT: int
    GR_AUTOREJOIN_TRIES: int
    GR_CONSISTENCY: str
    GR_NODE1_PORT: int
    GR_NODE2_PORT: int
    GR_NODE3_PORT: int
    GALERA_IMAGE: str
    GALERA_SUSPECT_TIMEOUT: str
    GALERA_INACTIVE_TIMEOUT: str
    GALERA_SEGMENTS: str
    GALERA_SST_METHOD: str
    GALERA_NODE1_PORT: int
    GALERA_NODE2_PORT: int
    GALERA_NODE3_PORT: int

    @property
    def values(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def db_image(self) -> str:
        return self.MARIADB_IMAGE if self.DB_FLAVOR == "mariadb" else self.MYSQL_IMAGE


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a dotenv file the way compose does for the simple forms: KEY=VALUE, quotes, comments."""
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ConfigError(f"{path.name} line {number}", f"expected KEY=VALUE, got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def load(environ: Mapping[str, str], env_file: Mapping[str, str] | None = None) -> Settings:
    """Environment over .env over defaults; raises ConfigError naming the first bad variable."""
    env_file = env_file or {}
    values: dict[str, object] = {}
    for var in VARIABLES:
        raw = environ.get(var.name)
        if raw is None:
            raw = env_file.get(var.name, var.default)
        if raw == "" and var.default and var.parse not in (_text, _token):
            raw = var.default
        values[var.name] = var.parse(var.name, raw)
    if not values["LAB_API_TOKEN"] and not str(values["CONTROLLER_BIND"]).startswith("127."):
        # The controller holds NET_ADMIN, SYS_ADMIN, the host's PIDs and the Docker socket: never an open
        # API on a network.
        raise ConfigError(
            "CONTROLLER_BIND",
            f"{values['CONTROLLER_BIND']} is reachable from other machines: set LAB_API_TOKEN too "
            "(e.g. LAB_API_TOKEN=$(openssl rand -hex 16)), or bind to 127.0.0.1",
        )
    return Settings(**values)  # type: ignore[arg-type]


def port_conflicts(settings: Settings, own_ports: set[int], profiles: tuple[str, ...] = ()) -> list[ConfigError]:
    """Ports the lab publishes (with these profiles) that another program already holds."""
    errors = []
    seen: dict[int, str] = {}
    for var in VARIABLES:
        if not var.port or (var.profile and var.profile not in profiles):
            continue
        port = settings.values[var.name]
        if port in seen:
            errors.append(ConfigError(var.name, f"port {port} is also {seen[port]}"))
            continue
        seen[port] = var.name
        if port in own_ports:
            continue
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((settings.CONTROLLER_BIND, port))
            except OSError:
                errors.append(ConfigError(var.name, f"port {port} is in use by another program"))
    return errors


def _own_ports(project: str) -> set[int]:
    """Host ports already published by this compose project's own containers."""
    try:
        out = subprocess.run(
            ["docker", "ps", "--filter", f"label=com.docker.compose.project={project}", "--format", "{{.Ports}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {int(p) for p in re.findall(r":(\d+)->", out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m laglab.config", description=__doc__)
    parser.add_argument("command", choices=["check"], help="validate and print shell assignments")
    parser.add_argument("--env-file", type=Path, default=Path(".env"))
    parser.add_argument("--ports", action="store_true", help="also check that published ports are free")
    parser.add_argument("--profiles", default="", help="comma-separated profiles whose ports count too")
    args = parser.parse_args(argv)
    import os

    try:
        file_values = read_env_file(args.env_file) if args.env_file.exists() else {}
        settings = load(os.environ, file_values)
        errors = (
            port_conflicts(
                settings,
                _own_ports(settings.COMPOSE_PROJECT_NAME),
                tuple(p for p in args.profiles.split(",") if p),
            )
            if args.ports
            else []
        )
    except ConfigError as error:
        errors = [error]
    if errors:
        for error in errors:
            print(f"laglab: error: {args.env_file}: {error}", file=sys.stderr)
        return 2
    for name, value in settings.values.items():
        print(f"{name}={shlex.quote(str(value))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
