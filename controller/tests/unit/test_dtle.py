"""DTLE against what a real DTLE 4.23 agent did (shared/REFERENCE.md, issue #11), with fakes of
Nomad, Consul and the two servers: the config it accepts, Consul's stale progress, its own schema,
caught-up on a delayed link, and no transaction lost or replayed across the hand-overs."""

import contextlib
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from laglab.measurement.lag import LagSample
from laglab.replicators import consistency, dtle
from laglab.scenarios.plan import load_text

from .fakes import LAB_SERVICES, FakePlatform, kind_parts

CONFIG = Path(__file__).resolve().parents[3] / "config" / "dtle"


def plugin_consul(text: str) -> str:
    block = text[text.index('plugin "dtle"') :]
    return re.search(r"^\s*consul\s*=\s*(.+)$", block, re.M).group(1).strip()


def dtle_plugin_schema(text: str) -> None:
    """What DTLE 4.23's plugin config schema says of `consul` (its one type check that bit the lab),
    with the agent's exact words."""
    if plugin_consul(text).startswith("["):
        raise ValueError(
            'plugin "dtle" (driver): failed to parse config: Incorrect attribute value type: '
            'Inappropriate value for attribute "consul": string required.'
        )


def test_the_old_list_form_fails_as_the_real_agent_did():
    old = dtle.agent_config("dtle-src", server=True).replace(
        'consul          = "consul:8500"', 'consul          = ["consul:8500"]'
    )
    with pytest.raises(ValueError, match='Inappropriate value for attribute "consul": string required'):
        dtle_plugin_schema(old)


def test_the_plugins_consul_setting_is_a_string():
    """A list made both agents exit: `plugin "dtle" (driver): failed to parse config: Incorrect attribute
    value type: Inappropriate value for attribute "consul": string required.`"""
    for name, server in (("dtle-src", True), ("dtle-dst", False)):
        rendered = dtle.agent_config(name, server=server)
        assert plugin_consul(rendered) == '"consul:8500"'
        dtle_plugin_schema(rendered)
        assert plugin_consul((CONFIG / f"{name}.hcl").read_text()) == '"consul:8500"'


def test_dtles_own_schemas_are_not_lab_data():
    """Every DTLE run said identical: false for dtle.gtid_executed_v4, which exists on the target only."""

    class Cursor:
        def __init__(self):
            self.args = None

        def execute(self, sql, args=None):
            self.args = args

        def fetchall(self):
            return [{"s": "lab", "t": "sbtest1"}]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cursor = Cursor()
    conn = type("Conn", (), {"cursor": lambda self: cursor})()
    assert consistency.lab_tables(conn) == {"lab.sbtest1"}
    assert {"dtle", "dm_meta", "laglab_meta", "mysql"} <= set(cursor.args)


# --- a small world: one source, native replication, DTLE, Consul -----------------------------------
def count(gtids: str) -> int:
    """'S:1-N' -> N (the fakes use one source UUID and contiguous sets)."""
    match = re.fullmatch(r"S:1-(\d+)", gtids)
    return int(match.group(1)) if match else 0


class World:
    """The source executed `source` transactions; who applied each one on the target."""

    def __init__(self, source: int, native: int):
        self.source, self.native, self.dtle = source, native, None
        self.native_running, self.job_running = True, False
        self.held, self.errant, self.dst_alive = False, "", True
        self.applied: dict[int, list[str]] = {i: ["native"] for i in range(1, native + 1)}
        self.kv: dict[str, str] = {}

    def apply(self, who: str, upto: int) -> None:
        done = self.native if who == "native" else self.dtle
        for i in range(done + 1, upto + 1):
            self.applied.setdefault(i, []).append(who)
        if who == "native":
            self.native = max(self.native, upto)
        else:
            self.dtle = max(self.dtle, upto)

    def write(self, n: int) -> None:
        """Load on the source; whoever replicates takes a little of it at once (a backlog remains)."""
        self.source += n
        if self.native_running:
            self.apply("native", self.source - 7)


class FakeNative:
    def __init__(self, world):
        self.world = world

    def source_executed(self):
        return f"S:1-{self.world.source}"

    def target_executed(self):
        return f"S:1-{self.world.native}"

    def subset(self, part, whole):
        return count(part) <= count(whole)

    def wait_target_executed(self, gtids, timeout):
        self.world.apply("native", count(gtids))  # the backlog drains
        return True

    def stop(self):
        self.world.native_running = False

    def hold(self):
        self.world.held = True

    def own_transactions(self, gtids):
        return self.world.errant

    def resume_from(self, applied):
        self.world.held = False
        self.world.native_running = True
        self.world.native = count(applied)  # gtid_purged: what others applied
        self.world.apply("native", self.world.source)  # auto-positioning fetches the rest


class FakeNomad:
    def __init__(self, world):
        self.world, self.submitted = world, []

    def submit(self, body):
        start = body["Job"]["TaskGroups"][0]["Tasks"][0]["Config"]["Gtid"]
        self.submitted.append((start, dict(self.world.kv)))
        gtid = self.world.kv.get("dtle/laglab/Gtid", start)  # what DTLE does: Consul's Gtid wins
        self.world.dtle, self.world.job_running = count(gtid), True

    def wait_running(self, job_id, timeout):
        return {"src": "running", "dest": "running"}

    def stop(self, job_id):
        self.world.job_running = False


class FakeConsul:
    """DTLE records its progress here a few transactions at a time, as it applies them."""

    def __init__(self, world):
        self.world, self.deleted = world, []

    def get(self, key):
        w = self.world
        if w.job_running and w.dst_alive:  # dtle-dst applies and reports through dtle-src
            w.apply("dtle", min(w.source, w.dtle + 5))
            w.kv.update(
                {"dtle/laglab/Gtid": f"S:1-{w.dtle}", "dtle/laglab/BinlogFilePos": "x", "dtle/laglab/NatsAddr": "y"}
            )
        return w.kv.get(key)

    def keys(self, prefix):
        return sorted(k for k in self.world.kv if k.startswith(prefix))

    def delete_tree(self, prefix):
        self.deleted.append(prefix)
        for key in self.keys(prefix):
            del self.world.kv[key]


class FakeRecorder:
    def __init__(self):
        self.paused = 0

    @contextlib.contextmanager
    def writes_paused(self):
        self.paused += 1
        yield


def dtle_parts(recorder=None):
    """A DTLE kind's parts (fakes.kind_parts): the lab's services and both agents running (their logs
    empty), a root password given; its heartbeats the test's."""
    platform = FakePlatform.running_services(*LAB_SERVICES, "dtle-src", "dtle-dst")
    return kind_parts(platform, environ={"MYSQL_ROOT_PASSWORD": "pw"}, recorder=recorder or FakeRecorder())


class FakeAgentsHttp:
    """The agents' /metrics as requests sees them: 200 with DTLE's series while an agent runs; once
    dtle-dst is killed, Docker's DNS no longer resolves its name, and requests raises what it raised
    against the real agent (issue #42: 'dtle-dst did not answer for 9 s')."""

    def __init__(self, world):
        self.world, self.asked = world, []

    def get(self, url, timeout):
        import requests

        self.asked.append(url)
        if "dtle-dst" in url and not self.world.dst_alive:
            raise requests.ConnectionError(
                "HTTPConnectionPool(host='dtle-dst', port=8190): Max retries exceeded with url: /metrics "
                "(Caused by NameResolutionError(\"Failed to resolve 'dtle-dst' ([Errno -2] Name or service not known)\"))"
            )
        text = 'dtle_delay_time{host="x",task_name="laglab_src"} 0\n'
        return type("Response", (), {"status_code": 200, "text": text})()


class Clock:
    """Seconds that pass only when read (each read: one second)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def driver_in(world, clock=time.monotonic):
    return dtle.Dtle(
        dtle_parts(),
        nomad=FakeNomad(world),
        http=FakeAgentsHttp(world),
        consul=FakeConsul(world),
        native=FakeNative(world),
        sleep=lambda s: None,
        clock=clock,
    )


REPLICATOR = load_text("name: x\nreplicator: {kind: dtle}\n").points[0].plan().replicator.options


def test_a_backlog_survives_both_hand_overs_and_nothing_is_replayed():
    world = World(source=100, native=88)  # native replication is 12 transactions behind
    driver = driver_in(world)
    driver.start(REPLICATOR, 0.25)
    assert driver.nomad.submitted[0][0] == "S:1-100"  # DTLE starts where native actually stopped
    world.write(40)  # the point's load, replicated by DTLE (and still behind when the point ends)
    driver.start(REPLICATOR, 0.1)  # the next point: new options, DTLE -> DTLE
    world.write(25)
    driver.stop()
    assert driver.applied == "S:1-165"  # native resumed from what DTLE recorded, not from the source
    assert {i: who for i, who in world.applied.items() if len(who) != 1} == {}  # none twice
    assert sorted(world.applied) == list(range(1, 166))  # none lost
    assert driver.parts.recorder.paused == 3  # every hand-over with the source's set standing still


def test_stale_progress_in_consul_never_overrides_the_start_point():
    """Seen: `Use gtid from consul gtid=...:1-135101` replayed what native had applied."""
    world = World(source=200, native=200)
    world.kv = {"dtle/laglab/Gtid": "S:1-150", "dtle/laglab/BinlogFilePos": "b", "dtle/laglab/NatsAddr": "n"}
    driver = driver_in(world)
    driver.start(REPLICATOR, 0.0)
    start, kv_at_submit = driver.nomad.submitted[0]
    assert start == "S:1-200" and kv_at_submit == {}  # the tree was gone when the job was submitted
    assert world.dtle == 200
    driver.stop()
    assert driver.consul.deleted == ["dtle/laglab", "dtle/laglab"] and driver.consul.keys("dtle/laglab") == []
    assert all(len(who) == 1 for who in world.applied.values())


class SeqRecorder:
    """Lag stays 0.3 s (a 250 ms RTT link) while heartbeats keep arriving."""

    def __init__(self):
        self.seq = 1000
        self.samples = []

    @property
    def written_seq(self):
        return self.seq

    def tick(self, *_):
        self.seq += 1
        self.samples.append(LagSample(time="t", epoch=0.0, status="ok", lag_seconds=0.3, heartbeat_seq=self.seq - 2))


def test_caught_up_on_a_delayed_link_is_a_newer_heartbeat_not_a_lag_of_zero():
    """Every sweep ending on a delayed point failed: `dtle did not catch up within 120s`."""
    lab = dtle_parts(SeqRecorder())
    driver = dtle.Dtle(lab, nomad=object(), http=object(), consul=object(), native=object())
    driver.wait_caught_up(5, sleep=lab.recorder.tick)
    assert lab.recorder.samples[-1].heartbeat_seq >= 1001 and lab.recorder.samples[-1].lag_seconds == 0.3
    stuck = dtle_parts(SeqRecorder())
    stuck.recorder.tick = lambda *_: None  # nothing arrives: a clear error, not a hang
    with pytest.raises(RuntimeError, match=r"dtle did not catch up within 0\.05s"):
        dtle.Dtle(stuck, nomad=object(), http=object(), consul=object(), native=object()).wait_caught_up(
            0.05, sleep=lambda s: __import__("time").sleep(0.01)
        )


def test_the_report_shows_dtles_delay_beside_the_heartbeat_lag():
    from laglab.scenarios.report.markdown import replicator_lines

    point = {"point": 1, "params": {"load.rate": 300}, "max_lag_seconds": 1.312,
             "replicator_metrics": {"max_delay_seconds": 1.0, "forward_mbit": 0.34, "back_mbit": 0.01}}  # fmt: skip
    assert "| 1 | 300 TPS | 1.312 | 1 | 0.34 / 0.01 |" in replicator_lines({"points": [point]})
    assert replicator_lines({"points": [{**point, "replicator_metrics": None}]}) == []
    # #42.4: a real 4.22 agent's dtle-dst kept dtle_network_out_bytes at 0 in every point
    silent = {**point, "replicator_metrics": {**point["replicator_metrics"], "back_mbit": 0.0}}
    lines = replicator_lines({"points": [silent]})
    assert "| 1 | 300 TPS | 1.312 | 1 | 0.34 / not counted |" in lines
    assert any(line.startswith('Back "not counted"') and "links.csv" in line for line in lines)


def test_a_hand_back_that_fails_stops_the_job_keeps_the_replica_held_and_names_the_repair():
    """Seen: dtle-dst killed and left down; after 300 s the controller logged `cleanup step failed`, the
    run showed its first reason only, the Nomad job went on running and the replica was left stopped
    without a mark, so the next mysqld start fetched again what DTLE had applied."""
    world = World(source=100, native=100)
    driver = driver_in(world)
    driver.HANDOVER_TIMEOUT = 0.05
    driver.start(REPLICATOR, 0.1)
    assert world.held and not world.native_running  # from the hand-over on, no restart starts native
    world.write(30)
    world.dst_alive = False  # kill -9 dtle-dst
    driver.parts.platform.act("dtle-dst", "kill")
    with pytest.raises(dtle.HandBackFailed) as failure:
        driver.stop()
    message, *logs = str(failure.value).splitlines()
    assert message.startswith("DTLE's hand-back to native replication failed: DTLE did not record the source's")
    assert message.endswith("`make up PROFILE=dtle` resumes it from DTLE's record")
    assert logs[0] == "dtle-src's DTLE log (last 5 lines): (empty)"  # each agent's log quoted
    assert logs[1].startswith("dtle-dst's DTLE log (last 5 lines): (no log: PlatformError: ") and "dtle-dst" in logs[1]
    assert failure.value.repair == "make up PROFILE=dtle" and failure.value.problem == "dtle-hand-back"
    assert not world.job_running  # it would apply beside native when its agent comes back
    assert world.held and not world.native_running and driver.running is False
    assert all(len(who) == 1 for who in world.applied.values())


def test_no_hand_over_from_a_target_with_errant_transactions():
    world = World(source=50, native=50)
    world.errant = "T:1-3"
    with pytest.raises(dtle.DriverError, match=r"the target executed T:1-3, which the source never did"):
        driver_in(world).start(REPLICATOR, 0.0)
    assert world.job_running is False


def agents(logs: dict[str, str]) -> FakePlatform:
    """The agents' containers, each answering `tail` with its log (an agent left out is not running)."""
    return FakePlatform.running_services(*logs, execs={a: (0, text.encode()) for a, text in logs.items()})


def test_a_job_that_does_not_start_quotes_the_agents_own_logs():
    """DTLE logs to /var/log/dtle in its container: a job's error never reached `docker compose logs`."""

    class Failing(FakeNomad):
        def wait_running(self, job_id, timeout):
            raise dtle.DriverError("DTLE task group dest failed: Exhausted restarts")

    world = World(source=10, native=10)
    driver = driver_in(world)
    driver.nomad = Failing(world)
    driver.parts = replace(
        driver.parts, platform=agents({"dtle-src": "", "dtle-dst": "ERROR dest: dial tcp mysql-target:3306: refused"})
    )
    with pytest.raises(dtle.DriverError) as failure:
        driver.start(REPLICATOR, 0.0)
    assert str(failure.value).splitlines() == [
        "DTLE task group dest failed: Exhausted restarts",
        "dtle-src's DTLE log (last 5 lines): (empty)",
        "dtle-dst's DTLE log (last 5 lines): ERROR dest: dial tcp mysql-target:3306: refused",
    ]
    driver.parts = replace(driver.parts, platform=agents({"dtle-src": "ok"}))
    assert driver.agent_logs().splitlines()[1] == (
        "dtle-dst's DTLE log (last 5 lines): (no log: PlatformError: dtle-dst not running)"
    )


def test_a_killed_agent_fails_the_hand_back_within_its_bound_not_after_300_s():
    """#42.5: the agent was unreachable from the first second, and the failure came 7 minutes later."""
    world = World(source=100, native=100)
    clock = Clock()
    driver = driver_in(world, clock)
    plan = load_text("name: x\nreplicator: {kind: dtle, unreachable_seconds: 10}\n")
    replicator = plan.points[0].plan().replicator.options
    driver.start(replicator, 0.1)
    world.write(30)
    world.dst_alive = False
    with pytest.raises(dtle.HandBackFailed) as failure:
        driver.stop()  # HANDOVER_TIMEOUT is still 300 s: the bound ends it
    assert clock.now < 60, f"{clock.now} s of the clock went by"
    message = str(failure.value)
    assert re.search(r"dtle-dst has not answered for 1\ds \(ConnectionError: failed to resolve\)", message), message
    assert "replicator.unreachable_seconds is 10" in message
    assert "make up PROFILE=dtle" in message and failure.value.repair == "make up PROFILE=dtle"


def test_the_agents_log_to_a_file_the_lab_reads():
    """#42.3: 4.22.11.0 with no log_file wrote nothing under /var/log/dtle. Nomad's `log_file` with a
    directory writes nomad-<timestamp>.log there (DTLE's own example config, actiontech/dtle
    docker-images/example/nomad-docker.hcl, sets log_file = "/dtle/var/log/nomad/"); the plugin's lines go
    to the agent's log."""
    for name, server in (("dtle-src", True), ("dtle-dst", False)):
        for text in (dtle.agent_config(name, server=server), (CONFIG / f"{name}.hcl").read_text()):
            assert re.search(r'^log_file\s*=\s*"/dtle/var/log/nomad/"$', text, re.M), name
    world = World(source=10, native=10)
    driver = driver_in(world)
    line = "2026-11-23T10:01:02.345Z [ERROR] client.driver_mgr.dtle: dest: dial tcp mysql-target:3306: connect: refused"

    def tail(argv):
        assert dtle.AGENT_LOG_DIR in argv[-1] and "nomad-*.log" in argv[-1]
        return 0, (line + "\n").encode()

    platform = FakePlatform.running_services("dtle-src", "dtle-dst", execs={"dtle-dst": tail, "dtle-src": tail})
    driver.parts = replace(driver.parts, platform=platform)
    assert driver.agent_logs().splitlines()[1] == f"dtle-dst's DTLE log (last 5 lines): {line}"


def test_a_killed_agent_comes_back_by_the_labs_fault_not_by_the_restart_policy():
    """#42.2: Docker does not restart a container ended with `docker kill` (seen against the real agent:
    exited, restarts=0 under `restart: unless-stopped`), so the docs must not promise it; the lab's own
    `fault kill ... --for` starts the agent again after its duration."""
    from laglab.faults import FaultManager

    from ..polling import wait_until

    lab = FakePlatform.running_services("dtle-src", "dtle-dst")
    faults = FaultManager(lab, settle_timeout=2)
    faults.inject("dtle-dst", "kill", duration=0.2)
    wait_until(lambda: lab.lab["dtle-dst"].running, 5, 0.02, "dtle-dst started again")
    assert lab.acted == [("dtle-dst", "kill"), ("dtle-dst", "start")]
    root = CONFIG.parents[1]
    docs = (root / "docs" / "profiles.md").read_text() + (root / "compose.yaml").read_text()
    assert "restart after a kill" not in docs and "comes\n  # back (restart policy)" not in docs
    assert "not after `docker kill`" in docs and "fault kill dtle-dst --for 20s" in docs
