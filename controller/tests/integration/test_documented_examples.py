"""The examples of README.md, docs/ and every `laglab ... --help` run as written against the lab, page by
page in the page's order (#36.2; tests/documented.py finds them and says which run here). Each runs with bash from the
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

from laglab.faults.base import ACTIONS

from ..documented import Example, ctrl_c_in_a_terminal, examples, help_rules, rule
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
    r"^\./laglab scenario new .*--server mysql:8\.0\.32": r"^wrote scenarios/tickets/ticket-4711\.yaml: .*, pinned to mysql:8\.0\.32$",
    r"^\./laglab scenario new ": r"^wrote scenarios/tickets/ticket-4711\.yaml: ",
    r"^\./laglab dashboard$": r"^http://\S+/#token=\w+$",
    r"^\./laglab lag$": r"^\S+\s+mysql-target\s.*\bok$",
    r"^\./laglab (shape|preset \S+) .*(--peer|--link)": r"^\S+: .* to \S+( on ports \S+)? \(egress\)",
    r"^\./laglab shape \S+ --rate .* --for ": r"^\S+: rate .*, \d+(\.\d)?s left$",
    r"^\./laglab clear\b": r"^cleared ",
    r"^\./laglab show$": r"^backend: ",
    r"^\./laglab show \S+ --json": r'"backend": ',
    r"^\./laglab preset$": r"^us-east-1/eu-west-1\s",
    r"^\./laglab matrix \S+\.yaml": r"^links:\n- delay: ",
    r"^\./laglab matrix --clear": r"^cleared the matrix",
    r"^\./laglab fault (kill|stop|pause|start|unpause|restart) ": r"^fault f\d+: \w+ \S+ \(in effect after ",
    r"^\./laglab fault undo": r"^(undone: fault f\d+: |no fault in force$)",  # after `undo f3`: none left
    r"^\./laglab fault list": r"^id\s+service\s+action\s+state",
    r"^\./laglab load (start|status$)": r"^load: (oltp_\w+ at \d+ TPS|the replay of \S+( at [\d.]+x)?, \d+ threads)",
    r"^\./laglab load stop": r"^stopping load: ",
    r"^\./laglab load status --json": r'^\s*"running": (true|false),$',
    r"^\./laglab runs$": r"^id\s+status\s+points",
    r"^\./laglab runs stop": r"^stopping run \S+: ",
    r"^\./laglab report ": r"^report: \S+/report\.md$",
    r"^\./laglab scenario list$": r"^scenarios/customer-example-rtt180-2mbit\.yaml\s+1\s+Ticket",
    r"^\./laglab scenario list -o json$": r'^      "file": "scenarios/customer-example-rtt180-2mbit\.yaml",$',
    r"^\./laglab reset$": r"(?s)^load: .*^faults: .*^partitions: healed$.*^shaping: cleared$",
}
PAGES = sorted({e.page for e in RUNS_HERE}, key=lambda p: (p != "README.md", p))
HELP_RUNS_HERE = [e for e, r, _ in help_rules() if r.kind == "lab"]
HELP_PAGES = list(dict.fromkeys(e.page for e in HELP_RUNS_HERE))  # laglab --help's order
CUSTOMER = "./laglab run scenarios/customer-example-rtt180-2mbit.yaml"  # a run to stop, for `runs stop`
TICKET = ROOT / "scenarios" / "tickets" / "ticket-4711.yaml"
# The first screen of the ticket's report README's example produces (#53): its verdict in the ticket's
# words, the caveats a quick run on a stand-in server owes the reader, units in words, the plot.
TICKET_REPORT = [
    r"^# ticket-4711: (REPRODUCED|NOT REPRODUCED|NOT VALID)$",
    r"^\*\*Verdict: (REPRODUCED|NOT REPRODUCED|NOT VALID)\.\*\*",
    r"A quick run \(20 s of load per point\)",
    r"starts after 10 min; this run's load stopped after 20 s",
    r"Not the ticket's server: mysql-source and mysql-target ran 9\.7\.\S+ \(Debian's stand-in laglab/mysql:9\.7-debian\) in place of mysql:8\.0\.32",
    r"^!\[lag\.png\]\(lag\.png\)$",
    r"RTT 180 ms, rate 2 Mbit/s",
]


class Shell:
    """One command at a time, each in a fresh bash that starts from the exports of the ones before."""

    def __init__(self, tmp_path: Path, lab_file: bool = False):
        """`lab_file`: keep LAGLAB_ENV_FILE, a terminal on a lab of its own (make test's second lab)."""
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "LAGLAB_"))}
        if lab_file and os.environ.get("LAGLAB_ENV_FILE"):
            self.env["LAGLAB_ENV_FILE"] = os.environ["LAGLAB_ENV_FILE"]
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
        """A command started as a terminal starts a foreground job: a process group of its own (Ctrl-C
        goes to the group) and SIGINT and SIGQUIT at their defaults. This suite may itself have been
        started with them ignored (a non-interactive shell's `cmd &`, as a CI runner may start it), and
        an ignored signal stays ignored across exec: `lag --follow` then outlived every SIGINT (#51)."""
        return subprocess.Popen(self.argv(command), cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=ctrl_c_in_a_terminal)  # fmt: skip


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
    replica = m[1] if (m := re.search(r"--replica (\S+)", command)) else "mysql-target"
    with shell.start(command) as process:
        try:
            read_until(process, rf"{replica} .* ok", 30)
            read_until(process, rf"{replica} .* ok", 30)
        finally:
            os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0


class Started:
    """A full experiment started as written in the background (its plan printed, the run posted), for
    `laglab runs stop` to interrupt as a user would from another terminal."""

    def __init__(self, shell: Shell, command: str):
        self.process = shell.start(command)
        try:
            self.printed = read_until(self.process, r"^run \S+ -> results/", 120)
        except BaseException:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise
        self.id, self.results = re.search(r"^run (\S+) -> (results/\S+)", self.printed, re.M).groups()

    def stopped(self) -> str:
        """Once stopped: it ends as documented (exit 1, interrupted); returns the run's results folder."""
        try:
            os.set_blocking(self.process.stdout.fileno(), True)
            rest = self.process.communicate(timeout=300)[0]
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        assert self.process.returncode == 1 and "interrupted" in rest, self.printed + rest
        return self.results


def started_then_stopped(shell: Shell, command: str) -> str:
    """A full experiment (tens of minutes): it starts as written, then `laglab runs stop` interrupts it;
    returns the run's results folder."""
    started = Started(shell, command)
    stop = shell.run("./laglab runs stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    return started.stopped()


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
    if "tickets/ticket-4711.yaml --quick" in command:  # the report a support engineer attaches
        report = ROOT / re.search(r"report: (results/\S+/report\.md)", done.stdout).group(1)
        first = "\n".join(report.read_text().splitlines()[:25])
        for said in TICKET_REPORT:
            assert re.search(said, first, re.M), f"{example}: {said!r} not in the report's first 25 lines:\n{first}"
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


def arranged(shell: Shell, example: Example, api) -> tuple[Example, Started | None]:
    """What a --help example assumes that its page does not do before it, done, and its placeholders
    filled: `fault undo f3` (the newest fault in force, made if none), `heal p2` (a partition, made), `runs stop [ID]`
    (a run in progress, started), `report results/RUN` (the run stopped before), a fault on a service an
    earlier fault of the page holds (undone, as its --for would have by now), `clear` of a service or
    link (shaped first: there is something to clear), `scenario new` (no file yet)."""
    command, started = example.command, None
    if m := re.match(r"\./laglab fault (\w+) (\S+)", command):
        action, service = m.groups()
        if action in ACTIONS and ACTIONS[action].needs_text == "running":
            for fault in api.get("/api/faults").json()["active"]:
                if fault["service"] == service:
                    assert api.delete(f"/api/faults/{fault['id']}", timeout=120).ok
    if m := re.match(r"\./laglab clear (\S+) --peer (\S+)", command):  # something to clear
        assert shell.run(f"./laglab shape {m[1]} --peer {m[2]} --delay 10ms").returncode == 0
    if m := re.match(r"\./laglab clear --link (\S+) (\S+)", command):
        assert shell.run(f"./laglab shape --link {m[1]} {m[2]} --rtt 10ms").returncode == 0
    if re.search(r"fault undo f\d+", command):
        if not api.get("/api/faults").json()["active"]:  # something to undo (`fault undo --help` alone)
            assert shell.run("./laglab fault pause mysql-target --for 20s").returncode == 0
        newest = api.get("/api/faults").json()["active"][-1]["id"]
        command = re.sub(r"\bf\d+\b", newest, command)
    if re.search(r"\bheal p\d+", command):
        made = shell.run("./laglab partition mysql-source -- mysql-target")
        assert made.returncode == 0, made.stderr
        command = re.sub(r"\bp\d+\b", re.search(r"^partition (p\d+):", made.stdout, re.M)[1], command)
    if command.startswith("./laglab runs stop"):
        started = Started(shell, CUSTOMER)
        command = re.sub(r"\d{8}T\d{6}Z-[\w-]+", started.id, command)
    if "results/RUN" in command:
        assert shell.last_run, f"{example}: no run stopped before it to stand for RUN"
        command = command.replace("results/RUN", shell.last_run)
    if " scenario new " in command:
        TICKET.unlink(missing_ok=True)
    return Example(example.page, example.line, example.block, command), started


@pytest.mark.parametrize("page", HELP_PAGES)
def test_a_help_pages_examples_run_as_written(page, api, compose, source, settings, tmp_path_factory):
    """Each --help page's examples in its order, from the lab `make up` leaves (put back after each
    page); a scenario's --quick run the README runs as written is not run twice (documented.py's `same`)."""
    shell = HELP_SHELL.setdefault("shell", Shell(tmp_path_factory.mktemp("help")))
    ran = 0
    try:
        for example in (e for e in HELP_RUNS_HERE if e.page == page):
            example, started = arranged(shell, example, api)
            run_example(shell, example)  # asserts its exit code and output
            ran += 1
            if started is not None:
                shell.last_run = started.stopped()
        assert ran == sum(e.page == page for e in HELP_RUNS_HERE), f"{page}: {ran} of its examples ran"
    finally:
        put_back(api, compose, settings.MYSQL_ROOT_PASSWORD)
        TICKET.unlink(missing_ok=True)


HELP_SHELL: dict[str, Shell] = {}  # one terminal for every --help page: `report results/RUN` after `runs stop`
