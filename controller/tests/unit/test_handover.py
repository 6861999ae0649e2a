"""The set-up job after a hand-over (issue #21), against a fake target that does MySQL's GTID set
arithmetic: a held replica, or one whose position does not cover DTLE's record, resumes from that
record; a running DTLE job is left alone; DTLE's rows read as MySQL would; MariaDB's errant entries.
The same sequence runs on the real lab in tests/integration/test_handover.py."""

import re

import pytest

from laglab.replicators import handover
from laglab.replicators.consistency import mariadb_errant
from laglab.replicators.db import Dialect, Endpoint
from laglab.replicators.dtle import dtle_job_state
from laglab.replicators.native import configure_target

from .fakes import FakeConnection

S = "3e11fa47-71ca-11e1-9e33-c80aa9429562"  # the source
T = "9b0f3a1c-2c43-11ef-8f3a-0242ac120004"  # the target's own


def parse(text: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        uuid, *intervals = part.split(":")
        for interval in intervals:
            a, _, b = interval.partition("-")
            out.setdefault(uuid, set()).update(range(int(a), int(b or a) + 1))
    return out


def show(gtids: dict[str, set[int]]) -> str:
    parts = []
    for uuid in sorted(u for u in gtids if gtids[u]):
        numbers, runs = sorted(gtids[uuid]), []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        parts.append(uuid + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in runs))
    return ",".join(parts)


def minus(a: str, b: str) -> str:
    left, right = parse(a), parse(b)
    return show({u: n - right.get(u, set()) for u, n in left.items()})


class Target:
    """mysql-target as the set-up job reads it: executed set, the hold, DTLE's rows, replica status."""

    def __init__(self, executed, held=False, dtle_rows=None, status=None):
        self.executed, self.held, self.dtle_rows = executed, held, dtle_rows
        self.status = {"Source_Host": "mysql-source", "Replica_IO_Running": "No", "Replica_SQL_Running": "No"}
        if status is not None:
            self.status = status
        self.conn = FakeConnection(self.answer)

    def answer(self, sql, args):
        if sql == "SHOW REPLICA STATUS":
            return [self.status] if self.status else []
        if "@@GLOBAL.gtid_executed AS g," in sql:  # handover.resume's check
            same = parse(self.executed) == parse(args[0])
            return [{"g": self.executed, "same": int(same)}]
        if sql == "SELECT @@GLOBAL.gtid_executed AS g":
            return [{"g": self.executed}]
        if sql == handover.HELD:
            return [{"v": "ON"}] if self.held else []
        if sql == handover.RELEASE:
            self.held = False
            return []
        if sql.startswith("SELECT 1 AS x FROM information_schema.TABLES"):
            return [{"x": 1}] if self.dtle_rows is not None else []
        if sql.startswith("SELECT HEX(source_uuid)"):
            return self.dtle_rows
        if sql.startswith("SELECT GTID_SUBTRACT(%s, '')"):
            return [{"g": show(parse(args[0]))}]
        if sql.startswith("SELECT GTID_SUBTRACT(%s, %s)"):
            return [{"g": minus(*args)}]
        if sql == "RESET BINARY LOGS AND GTIDS":
            self.executed = ""
        if sql == "SET GLOBAL gtid_purged = %s":
            self.executed = args[0]
        return []

    def statements(self):
        return [s for s in self.conn.log if not s.startswith("SELECT") and s != "SHOW REPLICA STATUS"]


def row(gno, gtid_set=None, uuid=S):
    return {"uuid": uuid.replace("-", "").upper(), "gtid": gno, "gtid_set": gtid_set}


SOURCE = Endpoint("mysql-source", 3306, "", "", "mysql-source")


def setup_job(target, source_executed, dtle_job=lambda: "stopped"):
    return configure_target(target.conn, Dialect("mysql"), SOURCE, "repl", "pw", source_executed, dtle_job=dtle_job)


def test_dtles_rows_read_as_one_gtid_set():
    rows = [row(0, "1-400:402"), row(401), row(403), row(7, uuid=T)]
    assert handover.format_record(rows) == f"{S}:1-400:402:401:403,{T}:7"  # the server normalises it
    with pytest.raises(ValueError, match="is not a UUID"):
        handover.format_record([{"uuid": "zz", "gtid": 1, "gtid_set": None}])


def test_a_failed_hand_back_resumes_native_from_dtles_record_not_from_its_old_position():
    """The sequence seen with a real agent: native stopped at S:1-399923, DTLE applied up to 401939
    under the target's own GTIDs (T:1-2016), then dtle-dst died and the hand-back failed."""
    target = Target(f"{S}:1-399923,{T}:1-2016", held=True, dtle_rows=[row(0, "1-401939")])
    assert setup_job(target, f"{S}:1-403185") == "resumed from DTLE's record"
    assert target.statements() == [
        "STOP REPLICA",
        "RESET BINARY LOGS AND GTIDS",
        "SET GLOBAL gtid_purged = %s",
        "START REPLICA",
        handover.RELEASE,
    ]
    assert target.executed == f"{S}:1-401939"  # auto-positioning fetches 401940- only: nothing twice
    assert not target.held


def test_a_replica_whose_position_does_not_cover_the_record_is_not_kept_even_when_running():
    """What `make up` did before: mysqld had restarted replication itself, the job said `replica kept`."""
    running = {"Source_Host": "mysql-source", "Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes"}
    target = Target(f"{S}:1-100", held=False, dtle_rows=[row(0, "1-150")], status=running)
    assert setup_job(target, f"{S}:1-200") == "resumed from DTLE's record"
    assert target.executed == f"{S}:1-150"


def test_a_running_dtle_job_is_left_alone_and_a_handed_back_replica_kept():
    held = Target(f"{S}:1-100,{T}:1-5", held=True, dtle_rows=[row(0, "1-120")])
    assert setup_job(held, f"{S}:1-130", dtle_job=lambda: "running") == "left to DTLE"
    assert held.statements() == []
    running = {"Source_Host": "mysql-source", "Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes"}
    done = Target(f"{S}:1-130", held=False, dtle_rows=[row(0, "1-120")], status=running)  # a good hand-back
    assert setup_job(done, f"{S}:1-130") == "kept"
    assert done.statements() == []


def test_the_resume_checks_the_set_it_resumes_from():
    class Stubborn(Target):
        def answer(self, sql, args):
            if sql == "SET GLOBAL gtid_purged = %s":
                self.executed = args[0] + f",{T}:1"  # something else committed in between
                return []
            return super().answer(sql, args)

    target = Stubborn(f"{S}:1-10", held=True)
    with pytest.raises(handover.HandOverError, match=r"executed set is .*, not '3e11fa47.*:1-10'"):
        handover.resume(target.conn, f"{S}:1-10")
    assert "START REPLICA" not in target.conn.log and target.held


class FakeNomad:
    def __init__(self, allocations):
        self.result, self.stopped = allocations, []

    def allocations(self, job_id):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def stop(self, job_id):
        self.stopped.append(job_id)


def test_the_set_up_job_sees_dtles_job_as_nomad_reports_it():
    import requests

    both = [{"TaskGroup": "src", "ClientStatus": "running"}, {"TaskGroup": "dest", "ClientStatus": "running"}]
    assert dtle_job_state(FakeNomad(both)) == "running"
    lost = [{"TaskGroup": "src", "ClientStatus": "running"}, {"TaskGroup": "dest", "ClientStatus": "lost"}]
    nomad = FakeNomad(lost)
    assert dtle_job_state(nomad) == "stopped" and nomad.stopped == ["laglab"]
    down = FakeNomad(requests.exceptions.ConnectionError("Failed to resolve 'dtle-src'"))
    assert dtle_job_state(down) is None and down.stopped == []


def test_mariadb_errant_entries_are_newer_than_the_sources_or_unknown_to_it():
    assert mariadb_errant("0-1-500", "0-1-500") == ""
    assert mariadb_errant("0-1-500", "0-1-500,0-2-7") == "0-2-7"  # written on the target (server id 2)
    assert mariadb_errant("0-1-500,1-1-9", "0-1-501,1-1-9") == "0-1-501"
    assert mariadb_errant("", "") == ""
    assert re.fullmatch(r"\d+-\d+-\d+", mariadb_errant("0-1-5", "0-3-1"))


class _Flavor:
    flavor = "mysql"


def _race(monkeypatch, source_reads: list[str], target: str):
    """consistency.check with the servers' GTID sets scripted: the source's reads in order (the last
    one repeats), the target's one set; GTID_SUBTRACT as the server computes it (minus())."""
    from laglab.replicators import consistency

    reads = iter(source_reads)
    last = {"set": source_reads[0]}

    def executed(conn, dialect):
        if conn == "dst":
            return target
        last["set"] = next(reads, last["set"])
        return last["set"]

    monkeypatch.setattr(consistency, "connect", lambda endpoint, **kw: endpoint)
    monkeypatch.setattr(consistency, "server_dialect", lambda conn: _Flavor())
    monkeypatch.setattr(consistency, "executed_gtids", executed)
    monkeypatch.setattr(consistency, "wait_executed", lambda conn, dialect, gtids, timeout, sleep=None: True)
    monkeypatch.setattr(consistency, "lab_tables", lambda conn: set())
    monkeypatch.setattr(
        consistency, "errant_gtids", lambda conn, dialect, source, target_set: minus(target_set, source)
    )

    class Closing(str):
        def close(self):
            pass

    return consistency.check(Closing("src"), Closing("dst"), timeout=5)


def test_a_transaction_the_source_has_not_marked_executed_yet_is_no_errant_one(monkeypatch):
    # Seen in CI: the target held the newest heartbeat (S:8967) while the source's gtid_executed did
    # not show it yet (binlog synced and sent, commit stage not over).
    report = _race(monkeypatch, [f"{S}:1-8966", f"{S}:1-8966", f"{S}:1-8967"], f"{S}:1-8967")
    assert report["gtid"]["errant"] == "" and report["identical"] is True


def test_a_real_errant_transaction_stays_one(monkeypatch):
    report = _race(monkeypatch, [f"{S}:1-10"], f"{S}:1-10,{T}:1")
    assert report["gtid"]["errant"] == f"{T}:1" and report["identical"] is False
