"""Load from the loadgen container: sysbench started with `docker exec` (the loadgen image is the
lab's own), its per-second report lines parsed as they arrive. Used by scenario runs and by the
dashboard's load panel (POST/GET/DELETE /api/load).

No password is ever on a command line (host `ps`, Docker's exec events, Kubernetes audit logs show
those): loadgen writes sysbench's and the client's option files itself, from the MYSQL_USER and
MYSQL_PASSWORD its own environment has (compose, or the Kubernetes Secret), and the tools read them.
A mysqlslap point's `setup` SQL goes to the server over PyMySQL, never through the mysql client, which
would run its own commands (`\\! cmd`, `system cmd`, `source file`) from the text."""

from __future__ import annotations

import collections
import os
import re
import signal
import threading
from dataclasses import dataclass, field

import pymysql

from laglab.deadline import WALL, Clock
from laglab.load import replay as replays
from laglab.measurement.results import iso
from laglab.replicators.db import Endpoint, run_sql

SCRIPTS = (
    "oltp_insert",
    "oltp_write_only",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_delete",
    "oltp_update_index",
    "oltp_update_non_index",
)
_REPORT_RE = re.compile(
    r"\[\s*(\d+)s\s*\]\s*thds:\s*(\d+)\s*tps:\s*([\d.]+)\s*qps:\s*([\d.]+).*?lat \(ms,95%\):\s*([\d.]+)\s*err/s:?\s*([\d.]+)"
)


def parse_sysbench_line(line: str) -> dict | None:
    match = _REPORT_RE.search(line)
    if not match:
        return None
    return {
        "elapsed_s": int(match.group(1)),
        "threads": int(match.group(2)),
        "tps": float(match.group(3)),
        "qps": float(match.group(4)),
        "latency_p95_ms": float(match.group(5)),
        "errors_per_s": float(match.group(6)),
    }


_SLAP_RE = re.compile(r"Average number of seconds to run all queries:\s*([\d.]+)")


OPTIONS_DIR = "/run/laglab"
SYSBENCH_OPTIONS = f"{OPTIONS_DIR}/sysbench.cfg"  # sysbench --config-file: option=value lines
CLIENT_OPTIONS = f"{OPTIONS_DIR}/client.cnf"  # [client] user, password: --defaults-extra-file
# Run by loadgen's own sh: printf is a builtin, so the expanded password is in no process's argv.
WRITE_OPTIONS = (
    f"umask 077 && mkdir -p {OPTIONS_DIR} && "
    f'printf "mysql-user=%s\\nmysql-password=%s\\n" "$MYSQL_USER" "$MYSQL_PASSWORD" > {SYSBENCH_OPTIONS} && '
    f'printf "[client]\\nuser=%s\\npassword=%s\\n" "$MYSQL_USER" "$MYSQL_PASSWORD" > {CLIENT_OPTIONS}'
)


def mysqlslap_argv(host: str, database: str, concurrency: int, queries: int, query: str) -> list[str]:
    """One mysqlslap iteration: `queries` executions of `query` split over `concurrency` clients (the
    account from CLIENT_OPTIONS, which must come first)."""
    return [
        "mysqlslap", f"--defaults-extra-file={CLIENT_OPTIONS}", f"--host={host}", f"--create-schema={database}",
        f"--concurrency={concurrency}", f"--number-of-queries={queries}", f"--query={query}", "--iterations=1",
    ]  # fmt: skip


def parse_mysqlslap(output: str) -> float | None:
    """Seconds mysqlslap took to run all queries, from its summary."""
    match = _SLAP_RE.search(output)
    return float(match.group(1)) if match else None


@dataclass(frozen=True)
class Replay:
    """A write profile replayed (replay.py): `figures` are the profile's own, for the report."""

    profile: replays.WriteProfile = field(repr=False)
    speed: float = 1.0
    name: str = "profile"
    figures: dict = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> dict:
        return {"profile": self.name, "speed": self.speed, "threads": self.profile.threads(), "figures": self.figures}


REPLAY = "profile"  # Profile.script of a replay


@dataclass(frozen=True)
class Profile:
    script: str = "oltp_write_only"
    tables: int = 4
    rows: int = 10000
    threads: int = 4
    rate: int = 0  # transactions per second; 0 = unlimited
    target: str = "mysql-source"
    protocol: str = "plain"  # plain | compressed | tls
    replay: Replay | None = None  # script REPLAY: this profile's replay (threads and rate are its own)

    @classmethod
    def replaying(cls, replay: Replay, target: str = "mysql-source", protocol: str = "plain") -> Profile:
        return cls(REPLAY, 0, 0, replay.profile.threads(), 0, target, protocol, replay)

    def shown(self, start: tuple[str, int] | None = None) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "replay"}
        if self.replay is not None:
            out["replay"] = self.replay.describe()
            out["replay"]["binlog_start"] = {"file": start[0], "position": start[1]} if start else None
        return out


def sysbench_argv(profile: Profile, command: str, database: str, seconds: int | None = None) -> list[str]:
    """The account comes from SYSBENCH_OPTIONS (written in loadgen from its environment)."""
    if profile.replay is not None:  # replay.lua and its plan, put into loadgen by prepare_replay
        argv = [
            "sysbench", f"{replays.DIRECTORY}/replay.lua", f"--plan={replays.DIRECTORY}/plan",
            f"--config-file={SYSBENCH_OPTIONS}", "--db-driver=mysql", f"--mysql-host={profile.target}",
            f"--mysql-db={database}", f"--threads={profile.threads}", f"--time={seconds or 0}", "--report-interval=1",
        ]  # fmt: skip
        if profile.protocol == "compressed":
            argv.append("--mysql-compression=on")
        elif profile.protocol == "tls":
            argv.append("--mysql-ssl=on")
        return [*argv, command]
    argv = [
        "sysbench", profile.script, f"--config-file={SYSBENCH_OPTIONS}", "--db-driver=mysql",
        f"--mysql-host={profile.target}", f"--mysql-db={database}",
        f"--tables={profile.tables}", f"--table-size={profile.rows}",
    ]  # fmt: skip
    if command == "run":
        argv += [
            f"--threads={profile.threads}",
            f"--rate={profile.rate}",
            f"--time={seconds or 0}",
            "--report-interval=1",
        ]
        if profile.protocol == "compressed":
            argv.append("--mysql-compression=on")
        elif profile.protocol == "tls":
            argv.append("--mysql-ssl=on")
    elif command == "prepare":
        argv.append(f"--threads={min(8, profile.tables)}")
    return [*argv, command]


class LoadBusy(RuntimeError):
    """The lab's one load generator is in use by `owner` ("panel" or a run id)."""

    def __init__(self, owner: str):
        super().__init__(f"a load is already running (started by {owner})")
        self.owner = owner


STARTING = -1  # a mysqlslap whose PID is not known yet


class LoadGenerator:
    """sysbench in the loadgen container: the lab has one, shared by the dashboard's load panel and
    scenario runs, so two loads never run at once. A load is stopped by its own process id (the
    controller shares the host's PID namespace), never by a pattern that could hit another one."""

    def __init__(self, platform, settings, kill=os.kill, cmdline=None, clock: Clock = WALL):
        self.platform, self.settings, self.clock = platform, settings, clock  # the clock its rows are stamped by
        self.rows: collections.deque[dict] = collections.deque(maxlen=3600)
        self._before: dict | None = None
        self.profile: Profile | None = None
        self.owner: str | None = None
        self.started: float | None = None
        self.seconds: int | None = None
        self.error: str | None = None
        self.pid: int | None = None  # the running sysbench, as the host sees it
        self.replay_start: tuple[str, int] | None = None  # (binlog file, position) where a replay began
        self.stopping = False
        self._thread: threading.Thread | None = None
        self._slaps: dict[str, int | None] = {}  # owner -> the PID of its mysqlslap while it runs
        self._lock = threading.Lock()
        self._kill = kill
        self._cmdline = cmdline or _cmdline

    def argv(self, profile: Profile, command: str, seconds: int | None = None) -> list[str]:
        return sysbench_argv(profile, command, self.settings.LAB_DATABASE, seconds)

    def write_options(self) -> None:
        """The tools' option files in loadgen, from its own environment (again each time: a recreated
        loadgen starts without them)."""
        code, out = self.platform.exec("loadgen", ["sh", "-c", WRITE_OPTIONS])
        if code != 0:
            raise RuntimeError(f"loadgen could not write its option files: {out.decode(errors='replace')[-300:]}")

    TLS_DIR = "/tls"

    def ensure_tls_files(self, server: str) -> None:
        """sysbench 1.0's --mysql-ssl=on reads cacert.pem, client-cert.pem and client-key.pem from its
        working directory: copy the ones the server generated (MySQL's auto_generate_certs) there."""
        files = {}
        for name, as_name in (
            ("ca.pem", "cacert.pem"),
            ("client-cert.pem", "client-cert.pem"),
            ("client-key.pem", "client-key.pem"),
        ):
            try:
                files[as_name] = self.platform.read_file(server, f"/var/lib/mysql/{name}")
            except Exception as error:
                raise RuntimeError(
                    f"{server} has no /var/lib/mysql/{name} (TLS needs the server's generated certificates): {error}"
                ) from None
        self.platform.put_files("loadgen", self.TLS_DIR, files)

    def prepare(self, profile: Profile) -> None:
        """cleanup + prepare the profile's tables (sysbench)."""
        self.write_options()
        for command in ("cleanup", "prepare"):
            code, output = self.platform.exec("loadgen", self.argv(profile, command))
            if code != 0:
                raise RuntimeError(f"sysbench {command} failed: {output.decode(errors='replace')[-500:]}")

    def prepare_replay(self, profile: Profile) -> tuple[str, int] | None:
        """A replay's tables made and its costs measured on its server (replay.calibrate), replay.lua and
        its plan put into loadgen; returns where in the server's binlog the replay will start."""
        replay, endpoint = profile.replay, self._root(profile.target)
        assert replay is not None
        costs = replays.calibrate(endpoint, self.settings.LAB_DATABASE, len(replay.profile.widths()))
        plan = replays.plan_text(replay.profile, replay.speed, costs)
        self.platform.put_files(
            "loadgen", replays.DIRECTORY, {"replay.lua": replays.SCRIPT.read_bytes(), "plan": plan.encode()}
        )
        self.replay_start = replays.start_position(endpoint)
        return self.replay_start

    def replayed(self, profile: Profile, start: tuple[str, int], seconds: float) -> dict:
        """The replay's figures from what its server wrote since `start` (replay.replayed)."""
        return replays.replayed(self.platform, profile.target, self._root(profile.target), start, seconds)

    def _root(self, server: str) -> Endpoint:
        return Endpoint(server, 3306, "root", self.settings.MYSQL_ROOT_PASSWORD, server)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, profile: Profile, seconds: int, on_row=None, owner: str = "panel") -> None:
        with self._lock:
            if self.running:
                raise LoadBusy(self.owner or "?")
            self.profile, self.seconds, self.started, self.error = profile, seconds, self.clock.time(), None
            self.owner, self.pid, self.stopping = owner, None, False
            self._before = self.rows[-1] if self.rows else None  # the last load's last row
            self.write_options()
            if profile.protocol == "tls":
                self.ensure_tls_files(profile.target)
            argv = self.argv(profile, "run", seconds)
            workdir = self.TLS_DIR if profile.protocol == "tls" else None
            execution = self.platform.exec_stream("loadgen", argv, workdir=workdir)
            stream = execution.chunks()
            self._thread = threading.Thread(target=self._follow, args=(stream, on_row), name="load", daemon=True)
            self._thread.start()
            self.pid = execution.pid()

    def _follow(self, stream, on_row) -> None:
        try:
            buffer = ""
            for chunk in stream:
                buffer += chunk.decode(errors="replace")
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    parsed = parse_sysbench_line(line)
                    if parsed:
                        now = self.clock.time()
                        row = {"time": iso(now), "epoch": round(now, 3), **parsed}
                        self.rows.append(row)
                        if on_row:
                            on_row(row)
                    elif "FATAL" in line:
                        self.error = line.strip()[:300]
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"

    def mysqlslap(
        self, target: str, concurrency: int, queries: int, query: str, setup: str | None = None, owner: str = "panel"
    ) -> dict:
        """Runs mysqlslap to completion in loadgen; returns seconds, queries per second, or the error.
        While it runs, stop_mysqlslap(owner) ends it (a cancelled run's cleanup: #52.3, it ran on in
        loadgen after the run had ended)."""
        s = self.settings
        if setup:
            try:
                run_sql(Endpoint(target, 3306, s.LAB_USER, s.LAB_PASSWORD, target), s.LAB_DATABASE, setup)
            except pymysql.MySQLError as error:
                return {"error": f"setup: {error}"[:300]}
        self.write_options()
        argv = mysqlslap_argv(target, s.LAB_DATABASE, concurrency, queries, query)
        with self._lock:
            self._slaps[owner] = STARTING
        try:
            execution = self.platform.exec_stream("loadgen", argv)
            pid = execution.pid()
            with self._lock:
                stopped = owner not in self._slaps  # stop_mysqlslap came while it started
                if not stopped:
                    self._slaps[owner] = pid
            if stopped:
                self._terminate_mysqlslap(pid)
            text = b"".join(execution.chunks()).decode(errors="replace")
        finally:
            with self._lock:
                self._slaps.pop(owner, None)
        seconds = parse_mysqlslap(text)  # its benchmark summary, printed once all its queries ran
        if seconds is None:
            return {"error": text.strip()[-300:] or "mysqlslap ended without its summary"}
        return {"seconds": seconds, "qps": round(queries / seconds, 2) if seconds else None}

    def stop_mysqlslap(self, owner: str) -> bool:
        """SIGTERM to `owner`'s mysqlslap, by its own PID (a recycled one is left alone); where the
        controller cannot see loadgen's processes (Kubernetes), pkill in loadgen. True when one ran."""
        with self._lock:
            if owner not in self._slaps:
                return False
            pid = self._slaps.pop(owner)
        if pid != STARTING:  # else mysqlslap() ends it as soon as it knows its PID
            self._terminate_mysqlslap(pid)
        return True

    def _terminate_mysqlslap(self, pid: int | None) -> None:
        if pid is None:
            self.platform.exec("loadgen", ["pkill", "-TERM", "-x", "mysqlslap"])
        elif "mysqlslap" in self._cmdline(pid):
            try:
                self._kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> None:
        if self._thread:
            self._thread.join(timeout)

    def stop(self, wait: float = 0.0) -> None:
        """SIGTERM to this load's own sysbench; returns at once unless asked to `wait` for its end."""
        pid = self.pid
        if self.running and pid and "sysbench" in self._cmdline(pid):  # a recycled PID is left alone
            self.stopping = True
            try:
                self._kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif self.running and pid is None:  # a platform whose processes the controller cannot see
            self.stopping = True  # (Kubernetes): loadgen runs one sysbench at a time, this load's
            self.platform.exec("loadgen", ["pkill", "-TERM", "-x", "sysbench"])
        if wait:
            self.wait(wait)

    def status(self) -> dict:
        latest = self.rows[-1] if self.rows else None
        if latest is not None and latest is self._before:
            latest = None  # the last load's figure: this one has not reported yet
        return {
            "running": self.running,
            "stopping": self.running and self.stopping,
            "owner": self.owner,
            "pid": self.pid,
            "profile": None if self.profile is None else self.profile.shown(self.replay_start),
            "started": iso(self.started) if self.started else None,
            "seconds": self.seconds,
            "latest": latest,
            "error": self.error,
        }


def _cmdline(pid: int) -> str:
    """The command line of a host process (the controller runs with pid: host), or '' when gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
