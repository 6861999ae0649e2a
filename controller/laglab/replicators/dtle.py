"""DTLE (ActionTech) as a replicator: the two agents' Nomad configuration, the replication job, and
the `Dtle` kind the runner drives (profile `dtle`).

Two agents, `dtle-src` (Nomad server + client, near the source) and `dtle-dst` (client only, near the
target), with Consul beside them. The shipped config binds the dtle API and NATS to 127.0.0.1; a lab
with two agents must bind 0.0.0.0 and advertise the service name, or the agents cannot reach each
other (NATS on 8193 is the data path between them). Formats: etc/dtle/nomad.hcl and
scripts/example.job.hcl of the dtle repository; the job is POSTed to Nomad's /v1/jobs as JSON.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from laglab.deadline import poll
from laglab.replicators import consistency
from laglab.replicators.base import Parts, ReplicatorPlan, Sleep, SourceToTarget, metrics_summary
from laglab.replicators.db import META_SCHEMA
from laglab.replicators.handover import REPAIR as handover_repair
from laglab.replicators.native import NativeLink, say


@dataclass(frozen=True)
class JobOptions:
    """The knobs the reference experiments turned (defaults are dtle's)."""

    group_max_size: int = 1  # bytes, not transactions
    group_timeout_ms: int = 100
    repl_chan_buffer_size: int = 32
    chunk_size: int = 2000
    gtid: str = ""  # "" = full copy, then incremental


# Nomad's log_file given a directory writes nomad-<timestamp>.log there, the dtle plugin's lines among
# them; DTLE's own example config sets this directory (actiontech/dtle docker-images/example/
# nomad-docker.hcl). Without log_file, 4.22.11.0 wrote no file at all (issue #42).
AGENT_LOG_DIR = "/dtle/var/log/nomad"


def agent_config(name: str, server: bool, consul: str = "consul:8500") -> str:
    """nomad.hcl for one agent; `name` is its compose service (also its Nomad node name)."""
    server_block = (
        "server {\n  enabled          = true\n  bootstrap_expect = 1\n}\n"
        if server
        else "server {\n  enabled = false\n}\n"
    )
    return f"""# Rendered by laglab for the {name} agent ({"server + client" if server else "client only"}).
name       = "{name}"
datacenter = "dc1"
data_dir   = "/dtle/var/lib/nomad"
plugin_dir = "/dtle/usr/share/dtle/nomad-plugin"
bind_addr  = "0.0.0.0"
log_level  = "Info"
log_file   = "{AGENT_LOG_DIR}/"
disable_update_check = true

ports {{
  http = 4646
  rpc  = 4647
  serf = 4648
}}
advertise {{
  http = "{name}:4646"
  rpc  = "{name}:4647"
  serf = "{name}:4648"
}}

{server_block}
client {{
  enabled = true
  options = {{
    "driver.blacklist" = "docker,exec,java,mock,qemu,rawexec,rkt"
  }}
}}

consul {{
  address = "{consul}"
}}

plugin "dtle" {{
  config {{
    data_dir        = "/dtle/var/lib/nomad"
    nats_bind       = "0.0.0.0:8193"
    nats_advertise  = "{name}:8193"
    consul          = "{consul}"
    api_addr        = "0.0.0.0:8190"
    nomad_addr      = "{name}:4646"
    publish_metrics = true
    stats_collection_interval = 5
  }}
}}
"""


def _connection(host: str, port: int, user: str, password: str) -> dict:
    return {"Host": host, "Port": port, "User": user, "Password": password}


def job(
    job_id: str,
    schemas: list[str],
    source: tuple[str, int, str, str],
    target: tuple[str, int, str, str],
    options: JobOptions = JobOptions(),
    src_node: str = "dtle-src",
    dst_node: str = "dtle-dst",
) -> dict:
    """The body of POST /v1/jobs: task groups `src` and `dest` pinned to their agents."""

    def group(name: str, node: str, config: dict) -> dict:
        return {
            "Name": name,
            "Count": 1,
            "Constraints": [{"LTarget": "${node.unique.name}", "RTarget": node, "Operand": "="}],
            "Tasks": [{"Name": name, "Driver": "dtle", "Config": config}],
            "RestartPolicy": {"Interval": 600_000_000_000, "Attempts": 3, "Delay": 15_000_000_000, "Mode": "delay"},
        }

    src_config = {
        "ReplicateDoDb": [{"TableSchema": schema} for schema in schemas],
        "GroupMaxSize": options.group_max_size,
        "GroupTimeout": options.group_timeout_ms,
        "ReplChanBufferSize": options.repl_chan_buffer_size,
        "ChunkSize": options.chunk_size,
        "DropTableIfExists": False,
        "Gtid": options.gtid,
        "SrcConnectionConfig": _connection(*source),
        "DestConnectionConfig": _connection(*target),
    }
    return {
        "Job": {
            "ID": job_id,
            "Datacenters": ["dc1"],
            "TaskGroups": [group("src", src_node, src_config), group("dest", dst_node, {"DestType": "mysql"})],
        }
    }


def group_timeout_for(one_way_delay_ms: float) -> int:
    """The reference's rule for a delayed link: GroupTimeout = 2 x one-way delay - 10 ms (at least dtle's 100)."""
    return max(100, round(2 * one_way_delay_ms - 10))


# --- driving a running DTLE (make up PROFILE=dtle) --------------------------------------------------

JOB_ID = "laglab"


class DriverError(RuntimeError):
    pass


class Nomad:
    """Nomad's HTTP API on the dtle-src agent (server): submit, watch and stop the replication job."""

    def __init__(self, base: str = "http://dtle-src:4646", http=None, timeout: float = 10.0):
        import requests

        self.base, self.http, self.timeout = base.rstrip("/"), http or requests.Session(), timeout

    def _call(self, method: str, path: str, **kwargs):
        response = self.http.request(method, self.base + path, timeout=self.timeout, **kwargs)
        if response.status_code >= 300:
            raise DriverError(f"Nomad {method} {path}: HTTP {response.status_code}: {response.text.strip()[:300]}")
        return response.json() if response.content else None

    def submit(self, body: dict) -> dict:
        return self._call("POST", "/v1/jobs", json=body)

    def allocations(self, job_id: str) -> list[dict]:
        return self._call("GET", f"/v1/job/{job_id}/allocations") or []

    def wait_running(self, job_id: str, timeout: float, sleep=time.sleep) -> dict[str, str]:
        """Until the `src` and `dest` allocations both run; a failed one raises with its last event."""
        states: dict[str, str] = {}

        def running() -> dict[str, str] | None:
            allocations = self.allocations(job_id)
            states.clear()
            states.update({a["TaskGroup"]: a["ClientStatus"] for a in allocations})
            if states.get("src") == "running" and states.get("dest") == "running":
                return dict(states)
            for a in allocations:
                if a["ClientStatus"] in ("failed", "lost"):
                    events = [e for t in (a.get("TaskStates") or {}).values() for e in t.get("Events") or []]
                    last = events[-1].get("DisplayMessage") if events else "no event"
                    raise DriverError(f"DTLE task group {a['TaskGroup']} {a['ClientStatus']}: {last}")
            return None

        return poll(
            running, timeout, interval=1, sleep=sleep,
            timed_out=lambda: DriverError(
                f"DTLE job {job_id} not running within {timeout:.0f}s: {states or 'no allocation'}"
            ),
        )  # fmt: skip

    def stop(self, job_id: str) -> None:
        self._call("DELETE", f"/v1/job/{job_id}", params={"purge": "true"})


class Consul:
    """Consul's KV store, where DTLE keeps a job's progress under dtle/<job>/ (Gtid, BinlogFilePos,
    NatsAddr). DTLE prefers that Gtid over the job's own on a restart of the same job name, and purging
    the Nomad job leaves it: a stale tree silently replays transactions, so the driver deletes it."""

    def __init__(self, base: str = "http://consul:8500", http=None, timeout: float = 10.0):
        import requests

        self.base, self.http, self.timeout = base.rstrip("/"), http or requests.Session(), timeout

    def _call(self, method: str, path: str, params=None):
        response = self.http.request(method, self.base + path, params=params, timeout=self.timeout)
        if response.status_code == 404:
            return None
        if response.status_code >= 300:
            raise DriverError(f"Consul {method} {path}: HTTP {response.status_code}: {response.text.strip()[:300]}")
        return response

    def get(self, key: str) -> str | None:
        response = self._call("GET", f"/v1/kv/{key}", params={"raw": "true"})
        return None if response is None else response.text

    def keys(self, prefix: str) -> list[str]:
        response = self._call("GET", f"/v1/kv/{prefix}", params={"keys": "true"})
        return [] if response is None else list(response.json())

    def delete_tree(self, prefix: str) -> None:
        self._call("DELETE", f"/v1/kv/{prefix}", params={"recurse": "true"})


def job_kv_prefix(job_id: str) -> str:
    return f"dtle/{job_id}"


AGENTS = ("dtle-src", "dtle-dst")


def parse_metrics(text: str, job_id: str = JOB_ID) -> dict:
    """dtle_delay_time (whole seconds; the largest of the job's tasks) and dtle_network_{in,out}_bytes
    (summed over the job's tasks) from one agent's /metrics; None where the agent has none."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict = {"delay_seconds": None, "network_in_bytes": None, "network_out_bytes": None}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if job_id not in sample.labels.get("task_name", ""):
                continue
            if sample.name == "dtle_delay_time":
                out["delay_seconds"] = max(out["delay_seconds"] or 0.0, sample.value)
            for direction in ("in", "out"):
                if sample.name.startswith(f"dtle_network_{direction}_bytes"):
                    key = f"network_{direction}_bytes"
                    out[key] = (out[key] or 0.0) + sample.value
    return out


def combine_metrics(views: dict[str, dict]) -> dict:
    """Both agents' views (by agent) into the link's: each agent only reports its own task. `forward`
    is what dtle-src sent towards dtle-dst (the transactions), `back` what dtle-dst sent back (replies,
    ~13 bytes each). Summing each direction over both agents gave the forward payload twice (src's out +
    dst's in in one column, src's in + dst's out in the other)."""
    src, dst = views.get("dtle-src") or {}, views.get("dtle-dst") or {}
    delays = [v["delay_seconds"] for v in views.values() if v.get("delay_seconds") is not None]
    return {
        "delay_seconds": max(delays) if delays else None,
        "forward_bytes": src.get("network_out_bytes"),
        "back_bytes": dst.get("network_out_bytes"),
    }


def _why(error: Exception) -> str:
    """A short reason for a gap: requests' messages run to 300 characters of pool and retry details."""
    text = str(error)
    for marker in ("Failed to resolve", "Connection refused", "timed out", "Name or service not known"):
        if marker in text:
            return f"{type(error).__name__}: {marker.lower()}"
    return f"{type(error).__name__}: {text[:120]}"


class AgentUnreachable(DriverError):
    """An agent did not answer for longer than the point allows (replicator.unreachable_seconds)."""


class HandBackFailed(DriverError):
    """DTLE could not hand the target back to native replication: the replica stays stopped and held.
    `problem`, `repair` and `repaired` put it on /api/health until the repair has run."""

    problem = "dtle-hand-back"

    def __init__(self, message: str, repaired=None, logs: str = ""):
        super().__init__(message + (f"\n{logs}" if logs else ""))
        self.repair, self.repaired = REPAIR, repaired


REPAIR = handover_repair  # the set-up job resumes native from DTLE's record (handover.verdict)


def _group_timeout(value):
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 3_600_000):
        return value
    raise ValueError(f"{value!r} is not a whole number of ms (1..3600000) or 'auto'")


class DtleOptions(BaseModel):
    """The job's grouping and buffers. group_timeout_ms "auto" = 2 x one-way delay - 10 ms of the
    point's link, as the reference experiments set it."""

    model_config = ConfigDict(extra="forbid")
    group_max_size: int = Field(
        1,
        ge=1,
        le=1 << 30,
        description="dtle: bytes a message groups before it is sent",
        json_schema_extra={"unit": "bytes"},
    )
    group_timeout_ms: Annotated[int | Literal["auto"], BeforeValidator(_group_timeout)] = Field(100, description="dtle: ms a group waits to fill; `auto` = 2 x one-way delay - 10 ms")  # fmt: skip
    repl_chan_buffer_size: int = Field(32, ge=1, le=100_000, description="dtle: the job's ReplChanBufferSize")
    chunk_size: int = Field(2000, ge=1, le=1_000_000, description="dtle: rows per chunk of the full copy")
    # An agent that answers nothing (its /metrics) this long fails the wait it holds up at once, with
    # the reason: a killed dtle-dst used to cost a 120 s catch-up wait and a 300 s hand-back wait.
    unreachable_seconds: int = Field(
        30, ge=5, le=3600, description="dtle: seconds an agent may not answer before a wait fails"
    )


class Dtle(SourceToTarget):
    """mysql-source -> dtle-src ~~ dtle-dst -> mysql-target, with native replication paused meanwhile.

    The job carries the lab schema and the heartbeat schema, so the lag recorder measures DTLE's lag.
    Every hand-over (native -> DTLE, DTLE -> DTLE with new options, DTLE -> native) happens at a
    caught-up point with the heartbeat writer paused, so the source's executed set stands still:
    - to DTLE: the target executes the source's set, native stops, and DTLE starts from the target's
      executed set (exactly what native applied);
    - from DTLE: DTLE's own record of what it applied (its Gtid in Consul) covers the source's set,
      the job stops, and native resumes from that record, never from the source's set.
    Consul's dtle/<job>/ tree is deleted before every start and after every stop: DTLE prefers a stale
    Gtid there over the job's own."""

    crash_repair = REPAIR  # the hand-back resumes native from DTLE's record: the set-up job does it

    checks_unshaped = True

    kind = "dtle"
    ports = (8193,)  # the agents' NATS link (config/dtle/dtle-*.hcl nats_bind)
    label = "DTLE"
    Options = DtleOptions
    sweepable = ("group_max_size", "group_timeout_ms")
    default_link = ("dtle-src", "dtle-dst")  # the agents' NATS link (the reference shaped it)
    HANDOVER_TIMEOUT = 300.0

    def __init__(
        self, parts: Parts, nomad: Nomad | None = None, http=None, consul=None, native=None, sleep=time.sleep,
        clock=time.monotonic,
    ):  # fmt: skip
        import requests

        super().__init__(parts)
        self.http = http or requests.Session()
        self.nomad = nomad or Nomad(http=self.http)
        self.consul = consul or Consul(http=self.http)
        self.native = native or (NativeLink(parts.source, parts.target) if parts is not None else None)
        self.sleep = sleep
        self.clock = clock
        self.running = False
        self.applied: str | None = None  # DTLE's Gtid at the last stop: where native resumed
        self.unreachable_seconds: float | None = None  # the running point's bound (None: not watched)
        self._answered: dict[str, float] = {}  # agent -> when it last answered (clock)
        self._silence: dict[str, str] = {}  # agent -> why it did not answer
        self._probed = float("-inf")

    def _inside(self, name: str) -> tuple[str, int, str, str]:
        return (name, 3306, "root", self.parts.settings.MYSQL_ROOT_PASSWORD)

    def job_options(self, replicator, rtt_seconds: float) -> JobOptions:
        timeout = replicator.group_timeout_ms
        if timeout == "auto":
            timeout = group_timeout_for(rtt_seconds * 1000 / 2)
        return JobOptions(
            group_max_size=replicator.group_max_size,
            group_timeout_ms=int(timeout),
            repl_chan_buffer_size=replicator.repl_chan_buffer_size,
            chunk_size=replicator.chunk_size,
        )

    def _heartbeats_paused(self):
        return self.parts.recorder.writes_paused()

    def _dtle_applied(self, timeout: float) -> str:
        """Waits until DTLE's record of what it applied covers the source's executed set; returns it."""
        wanted = self.native.source_executed()
        key = f"{job_kv_prefix(JOB_ID)}/Gtid"
        seen = [""]

        def covered() -> str | None:
            self._watch_agents()
            seen[0] = self.consul.get(key) or ""
            return seen[0] if seen[0] and self.native.subset(wanted, seen[0]) else None

        return poll(
            covered, timeout, interval=0.5, sleep=self.sleep,
            timed_out=lambda: DriverError(
                f"DTLE did not record the source's transactions within {timeout:g}s "
                f"(source {wanted!r}, DTLE's Gtid {seen[0]!r})"
            ),
        )  # fmt: skip

    def _stop_job(self) -> str:
        try:
            applied = self._dtle_applied(self.HANDOVER_TIMEOUT)
        except Exception as error:
            # Left as it is, the job would go on applying when its agent comes back, beside native: stop it.
            # The target stays held; `make up` resumes native from DTLE's record on the target.
            with contextlib.suppress(Exception):
                self.nomad.stop(JOB_ID)
            self.running = False
            raise HandBackFailed(
                f"DTLE's hand-back to native replication failed: {error}. The replica is stopped and held "
                f"(no restart fetches again what DTLE applied); `{REPAIR}` resumes it from DTLE's record",
                repaired=self._handed_back,
                logs=self.agent_logs(),
            ) from error
        self.nomad.stop(JOB_ID)
        self.consul.delete_tree(job_kv_prefix(JOB_ID))
        self.running = False
        return applied

    def agent_logs(self, lines: int = 5) -> str:
        """The tail of each agent's log file (agent_config's log_file: Nomad's and the dtle plugin's lines),
        which a failure quotes."""
        out = []
        for agent in AGENTS:
            try:
                _code, text = self.parts.platform.exec(
                    agent, ["sh", "-c", f"tail -q -n {int(lines)} {AGENT_LOG_DIR}/nomad-*.log 2>/dev/null"]
                )
                tail = (text or b"").decode(errors="replace").strip()
            except Exception as error:  # the agent is down: that is the news
                tail = f"(no log: {type(error).__name__}: {str(error)[:80]})"
            out.append(f"{agent}'s DTLE log (last {lines} lines): {tail or '(empty)'}")
        return "\n".join(out)

    def _handed_back(self) -> bool:
        """The repair ran: the target's replica is no longer held (handover.held)."""
        from laglab.replicators.db import connect
        from laglab.replicators.handover import held

        conn = connect(self.parts.target, timeout=3)
        try:
            return not held(conn)
        finally:
            conn.close()

    def apply(self, plan: ReplicatorPlan, sleep: Sleep = time.sleep) -> None:
        self.start(plan.options, plan.rtt)

    def start(self, replicator, rtt_seconds: float) -> None:
        with self._heartbeats_paused():
            if self.running:  # new options: DTLE -> DTLE, from what the running job applied
                start_at = self._stop_job()
            else:  # native -> DTLE, at a point where the target has everything native fetched
                wanted = self.native.source_executed()
                if not self.native.wait_target_executed(wanted, self.HANDOVER_TIMEOUT):
                    raise DriverError(
                        f"native replication did not catch up within {self.HANDOVER_TIMEOUT:g}s: not handing over"
                    )
                self.native.stop()
                self.native.hold()  # a restarted target must not fetch again what DTLE applies
                start_at = self.native.target_executed()
                errant = self.native.own_transactions(start_at)
                if errant:
                    raise DriverError(
                        f"the target executed {errant}, which the source never did (errant transactions): not "
                        "handing over (DTLE would start from a set the source does not have)"
                    )
            self.consul.delete_tree(job_kv_prefix(JOB_ID))  # no stale Gtid may override ours
            options = JobOptions(**{**self.job_options(replicator, rtt_seconds).__dict__, "gtid": start_at})
            schemas = [self.parts.settings.LAB_DATABASE, META_SCHEMA]
            body = job(JOB_ID, schemas, self._inside("mysql-source"), self._inside("mysql-target"), options)
            self.nomad.submit(body)
            self.running = True
            self.unreachable_seconds = replicator.unreachable_seconds
            self._answered, self._silence, self._probed = {}, {}, float("-inf")
            try:
                self.nomad.wait_running(JOB_ID, 120)
            except DriverError as error:
                logs = self.agent_logs()
                raise DriverError(f"{error}\n{logs}" if logs else str(error)) from error

    def wait_caught_up(self, timeout: float, sleep: Sleep | None = None) -> None:
        """Caught up = the target holds a heartbeat written after this call, whatever the link's delay
        (a lag of exactly 0 never comes while the link is delayed)."""
        recorder = self.parts.recorder
        mark = recorder.written_seq + 1

        def arrived() -> bool:
            self._watch_agents()
            latest = recorder.samples[-1] if recorder.samples else None
            return latest is not None and latest.heartbeat_seq is not None and latest.heartbeat_seq >= mark

        poll(
            arrived, timeout, interval=0.2, sleep=sleep or self.sleep,
            timed_out=lambda: RuntimeError(f"dtle did not catch up within {timeout:g}s"),
        )  # fmt: skip

    def _watch_agents(self) -> None:
        """Each agent's /metrics, probed once a second at most while a wait runs: one silent for longer than
        unreachable_seconds ends the wait now, naming it and why (the lab's event and the run's reason)."""
        import requests

        if self.unreachable_seconds is None:
            return
        now = self.clock()
        if now - self._probed < 1.0:
            return
        self._probed = now
        for agent in AGENTS:
            try:
                response = self.http.get(f"http://{agent}:8190/metrics", timeout=2)
                if response.status_code == 200:
                    self._answered[agent] = now
                    self._silence.pop(agent, None)
                    continue
                self._silence[agent] = f"HTTP {response.status_code}"
            except requests.RequestException as error:
                self._silence[agent] = _why(error)
            silent = now - self._answered.setdefault(agent, now)
            if silent > self.unreachable_seconds:
                raise AgentUnreachable(
                    f"{agent} has not answered for {silent:.0f}s ({self._silence[agent]}); "
                    f"replicator.unreachable_seconds is {self.unreachable_seconds:g}"
                )

    def sample(self) -> dict:
        """Both agents' figures; an agent that does not answer is a gap with its reason (DTLE resumes
        from Consul's Gtid when the agent comes back: the point goes on)."""
        import requests

        views, unreachable = {}, {}
        for agent in AGENTS:
            try:
                response = self.http.get(f"http://{agent}:8190/metrics", timeout=5)
            except requests.RequestException as error:
                unreachable[agent] = _why(error)
                continue
            if response.status_code != 200:
                unreachable[agent] = f"HTTP {response.status_code}"
                continue
            views[agent] = parse_metrics(response.text)
        out = combine_metrics(views)
        if unreachable:
            out["unreachable"] = unreachable
        return out

    def summary(self, plan: ReplicatorPlan, samples) -> dict:
        return {"replicator_metrics": metrics_summary(samples)}

    def consistency(self, sleep: Sleep = time.sleep) -> dict:
        """Once caught up, native replication resumes from there, and the usual check runs."""
        self.wait_caught_up(120, sleep=sleep)
        self.stop()
        return consistency.check(self.parts.source, self.parts.target, timeout=120, sleep=sleep)

    def restore(self) -> None:
        self.stop()

    def stop(self) -> None:
        if not self.running:
            return
        with self._heartbeats_paused():
            self.applied = self._stop_job()
            self.native.resume_from(self.applied)


def dtle_job_state(nomad=None) -> str | None:
    """The lab's DTLE job as the set-up job sees it: 'running' (both task groups), 'stopped' (it was not
    running in both, and is now stopped) or None (no DTLE agent answers: the profile is not up)."""
    nomad = nomad or Nomad(timeout=3.0)
    try:
        allocations = nomad.allocations(JOB_ID)
    except (DriverError, OSError) as error:  # requests' errors are OSErrors (a name that does not resolve)
        say(f"DTLE: no agent answers ({type(error).__name__}); no job to stop")
        return None
    states = {a["TaskGroup"]: a["ClientStatus"] for a in allocations if a.get("DesiredStatus", "run") == "run"}
    if states.get("src") == "running" and states.get("dest") == "running":
        return "running"
    if allocations:
        nomad.stop(JOB_ID)
        say(f"DTLE job {JOB_ID} stopped (its task groups were {states or 'not running'})")
    return "stopped"
