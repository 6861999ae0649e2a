"""The examples of README.md and docs/ run as written against the lab, page by page in the page's order
(#36.2; tests/documented.py finds them and says which run here). Each runs with bash from the
checkout's root, in a shell that keeps what an earlier example exported (`export LAB_API_TOKEN=...`),
without the lab's settings in its environment: as a user's terminal after `make up`.

An example passes when it exits 0 (a `curl -s` one: when its answer is not the API's error shape). A
page's block assumes the lab `make up` leaves; before it, what an earlier test left is put back the
way a fresh lab has it (named in `before`), and after it the lab is put back for the next test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ..documented import examples, rule
from .conftest import ROOT, wait_until

RUNS_HERE = [e for e in examples() if rule(e).kind in ("lab", "started")]
# What some examples must print besides exiting 0 (a command's regex -> its output's).
PRINTS = {
    r"^\./laglab status\b": r"(?s)^(?=.*mysql-source\s+running)(?=.*mysql-target\s+running)(?=.*loadgen\s+running)",
    r"^\./laglab consistency\b": r"identical\s*$",
    r"^\./laglab run \S+ --plan": r"point\(s\), about \d+ (s|min)",
    r"^\./laglab run \S+ --quick": r"^completed - report: results/\S+/report\.md",
    r"^\./laglab partition ": r"^partition p\d+: ",
    r"^\./laglab heal\b": r"^healed ",
    r"^\./laglab scenario new ": r"^wrote \S*scenarios/ticket-4711\.yaml",
}
PAGES = sorted({e.page for e in RUNS_HERE}, key=lambda p: (p != "README.md", p))
TICKET = ROOT / "scenarios" / "ticket-4711.yaml"


class Shell:
    """One command at a time, each in a fresh bash that starts from the exports of the ones before."""

    def __init__(self, tmp_path: Path):
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "LAGLAB_"))}
        self.file = tmp_path / "env"
        self.last_run: str | None = None

    def argv(self, command: str) -> list[str]:
        return ["bash", "-c", 'eval "$1"; rc=$?; env -0 > "$2"; exit $rc', "example", command, str(self.file)]

    def keep_env(self) -> None:
        if self.file.exists():
            self.env = dict(item.split("=", 1) for item in self.file.read_text().split("\0") if "=" in item)

    def run(self, command: str, timeout: float = 180) -> subprocess.CompletedProcess:
        done = subprocess.run(
            self.argv(command), cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        self.keep_env()
        return done

    def start(self, command: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(command), cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip


def read_until(process: subprocess.Popen, pattern: str, timeout: float) -> str:
    """What the process printed up to a line matching pattern (fails after timeout)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    os.set_blocking(process.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line:
            seen.append(line)
            if re.search(pattern, line):
                return "".join(seen)
        elif process.poll() is not None:
            break
        else:
            time.sleep(0.05)
    raise AssertionError(f"no line matching {pattern!r} in {timeout} s: {''.join(seen)[-2000:]}")


def follow_then_ctrl_c(shell: Shell, command: str) -> None:
    """`laglab lag --follow` prints until Ctrl-C: two samples, then SIGINT, as a user's terminal sends it."""
    with shell.start(command) as process:
        try:
            read_until(process, r"mysql-target .* ok", 30)
            read_until(process, r"mysql-target .* ok", 30)
        finally:
            os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0


def started_then_stopped(shell: Shell, command: str) -> str:
    """A full experiment (tens of minutes): it starts as written (its plan printed, the run posted), then
    `laglab runs stop` interrupts it as a user would; returns the run's results folder."""
    with shell.start(command) as process:
        try:
            printed = read_until(process, r"^run \S+ -> results/", 120)
            stop = shell.run("./laglab runs stop")
            assert stop.returncode == 0, stop.stdout + stop.stderr
            os.set_blocking(process.stdout.fileno(), True)
            rest = process.communicate(timeout=300)[0]
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 1 and "interrupted" in rest, printed + rest  # stopped: exit 1, as documented
    return re.search(r"-> (results/\S+)", printed).group(1)


def run_example(shell: Shell, example) -> None:
    command = example.command
    if rule(example).kind == "started":
        shell.last_run = started_then_stopped(shell, command)
        return
    if re.search(r"laglab lag (--follow|-f)\b", command):
        follow_then_ctrl_c(shell, command)
        return
    if "results/<run>" in command:
        assert shell.last_run, f"{example}: no run of the page before it to stand for <run>"
        command = command.replace("results/<run>", shell.last_run)
    timeout = 900 if "--quick" in command else 300
    if re.search(r"mysql-target mysql .*SELECT", command):  # the row written on the source a moment ago
        done = wait_until(lambda: (d := shell.run(command)).returncode == 0 and d, 30, 0.5, f"{example} to replicate")
    else:
        done = shell.run(command, timeout=timeout)
    assert done.returncode == 0, f"{example}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    for pattern, printed in PRINTS.items():
        if re.search(pattern, command):
            assert re.search(printed, done.stdout, re.M), f"{example}: {printed!r} not in\n{done.stdout[-2000:]}"
    if command.startswith("curl"):
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            answer = None
        assert not (isinstance(answer, dict) and "error" in answer), f"{example}: {done.stdout[:500]}"
        assert done.stdout.strip() or "DELETE" in command, f"{example}: no answer"


def put_back(api, compose, root_password: str) -> None:
    """The lab as the next test expects it: no load, shaping, partition, fault or applier delay."""
    api.delete("/api/load", timeout=60)
    for fault in api.get("/api/faults").json()["active"]:
        api.delete(f"/api/faults/{fault['id']}", timeout=120)
    assert api.delete("/api/partitions", timeout=60).status_code == 204
    assert api.delete("/api/shaping", timeout=60).status_code == 204
    compose("exec", "-T", "mysql-target", "mysql", "-uroot", f"-p{root_password}", "-e",
            "STOP REPLICA SQL_THREAD; CHANGE REPLICATION SOURCE TO SOURCE_DELAY=0; START REPLICA SQL_THREAD", check=False)  # fmt: skip

    def replicating():
        latest = api.get("/api/lag?seconds=0", timeout=10).json()["latest"]
        return bool(latest) and latest["status"] == "ok" and latest["lag_seconds"] < 2.0

    wait_until(replicating, 180, 0.5, "replication to flow again after the page's examples")


def before(page: str, source) -> None:
    """What a page's block assumes of a fresh lab, where an earlier test (or an earlier run of this one)
    left something else."""
    if page == "README.md":
        TICKET.unlink(missing_ok=True)  # `scenario new ticket-4711` refuses to overwrite (--force does)
    if page == "docs/configuration.md":  # sysbench prepare makes sbtest1..4 (and fails when they exist)
        with source.cursor() as cur:
            for n in range(1, 5):
                cur.execute(f"DROP TABLE IF EXISTS lab.sbtest{n}")


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_examples_run_as_written(page, api, compose, source, settings, tmp_path):
    assert settings.MYSQL_ROOT_PASSWORD == "laglab", "the pages' examples use .env.example's passwords"
    shell = Shell(tmp_path)
    before(page, source)
    try:
        for example in (e for e in RUNS_HERE if e.page == page):
            run_example(shell, example)
    finally:
        put_back(api, compose, settings.MYSQL_ROOT_PASSWORD)
        if page == "README.md":
            TICKET.unlink(missing_ok=True)
