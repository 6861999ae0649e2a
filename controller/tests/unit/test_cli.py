"""The `laglab` command against a stand-in controller over HTTP: the exact API calls each command makes,
and what it does with the API's answers (tables, --json, one-line errors, exit codes). The stand-in
answers as the controller does, errors included ({"error", "status"}: tests/unit/test_api.py checks the
real one's). The command against the real lab: tests/integration/test_cli.py."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from laglab.api import models
from laglab.cli import cli
from laglab.cli.base import EXIT_CODES

from ..documented import ctrl_c_in_a_terminal, help_examples, parse_cli
from ..polling import wait_until

ROOT = Path(__file__).resolve().parents[3]

SAMPLE = {"time": "2026-11-25T18:00:00.123456Z", "epoch": 1.0, "status": "ok", "reason": None, "replica": "mysql-target",
          "lag_seconds": 0.25, "lag_error_seconds": 0.001, "applier_lag_seconds": 0.002, "transit_seconds": 0.1,
          "io_running": "Yes", "sql_running": "Yes"}  # fmt: skip


def laglab(controller, *args):
    return CliRunner().invoke(cli, ["--url", controller.url, "--token", "", *args], catch_exceptions=False)


def shaping_answer(service, peer):
    return {
        "service": service,
        "backend": "userspace",
        "desired": [{"delay": "90ms", "peer": peer, "direction": "egress"}],
    }


def test_shape_link_sets_both_directions_with_half_the_round_trip(controller):
    controller.answer("PUT /api/shaping/mysql-source", shaping_answer("mysql-source", "mysql-target"))
    controller.answer("PUT /api/shaping/mysql-target", shaping_answer("mysql-target", "mysql-source"))
    result = laglab(controller, "shape", "--link", "mysql-source", "mysql-target", "--rtt", "180ms", "--jitter", "10ms",
                    "--rate", "2mbit", "--loss", "1%", "--for", "60s")  # fmt: skip
    assert result.exit_code == 0, result.output
    common = {"delay": "90ms", "jitter": "5ms", "rate": "2mbit", "loss": "1%", "duration": "60s"}
    assert controller.requests == [
        ("PUT", "/api/shaping/mysql-source", {**common, "peer": "mysql-target"}),
        ("PUT", "/api/shaping/mysql-target", {**common, "peer": "mysql-source"}),
    ]
    assert "mysql-source: delay 90 ms to mysql-target (egress)" in result.output


def test_shape_sends_every_field_as_written(controller):
    controller.answer("PUT /api/shaping/loadgen", shaping_answer("loadgen", None))
    result = laglab(controller, "shape", "loadgen", "--peer", "mysql-source", "--direction", "both", "--delay", "20ms",
                    "--jitter", "2ms", "--distribution", "normal", "--correlation", "25%", "--gemodel", "1%,20%",
                    "--duplicate", "0.1%", "--corrupt", "0.2%", "--reorder", "5%", "--gap", "3")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert controller.requests == [("PUT", "/api/shaping/loadgen", {
        "delay": "20ms", "jitter": "2ms", "distribution": "normal", "correlation": "25%", "duplicate": "0.1%",
        "corrupt": "0.2%", "reorder": "5%", "gap": 3, "gemodel": {"p": "1%", "r": "20%"}, "peer": "mysql-source",
        "direction": "both"})]  # fmt: skip


def test_shape_has_an_option_for_every_field_of_the_api():
    fields = {f.alias or name for name, f in models.ShapingBody.model_fields.items()}
    options = {opt.lstrip("-") for p in cli.commands["shape"].params for opt in p.opts}
    assert fields - options == set() and {"for", "duration"} <= options  # --for, and pumba's --duration
    assert "for" in options


def test_the_api_refusing_is_exit_3_with_its_message_on_one_line(controller):
    controller.answer(
        "PUT /api/shaping/nosuch", {"error": "service: no service 'nosuch' in this lab", "status": 404}, 404
    )
    result = CliRunner().invoke(cli, ["--url", controller.url, "shape", "nosuch", "--delay", "1ms"])
    assert result.exit_code == EXIT_CODES["refused"] == 3
    assert result.stderr == "laglab: error: PUT /api/shaping/nosuch: service: no service 'nosuch' in this lab (404)\n"


def test_an_unreachable_controller_is_exit_4():
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "status"])
    assert result.exit_code == 4
    assert result.stderr.startswith("laglab: error: the controller at http://127.0.0.1:9 cannot be reached")


@pytest.mark.parametrize(
    "args",
    [["shape", "--delay", "1ms"], ["shape", "a", "--rtt", "10ms"], ["shape", "--link", "a", "b", "--rtt", "10ms", "--delay", "1ms"],
     ["clear", "--peer", "b"], ["lag", "--nosuch"], ["fault", "explode", "x"]],
)  # fmt: skip
def test_usage_errors_are_exit_2_and_touch_nothing(controller, args):
    result = laglab(controller, *args)
    assert result.exit_code == 2, result.output
    assert controller.requests == []


def test_clear_heal_and_undo_call_the_deletes(controller):
    for route in (
        "DELETE /api/shaping",
        "DELETE /api/shaping/mysql-source",
        "DELETE /api/partitions",
        "DELETE /api/partitions/p2",
    ):
        controller.answer(route, None, 204)
    # the API's fault ids are f<n> (its path pattern); `fault undo 3` means f3
    controller.answer("DELETE /api/faults/f3", {"id": "f3", "service": "x", "action": "pause", "duration_seconds": None, "effect_ms": 5.0})  # fmt: skip
    for args in (
        ["clear"],
        ["clear", "mysql-source", "--peer", "mysql-target"],
        ["heal"],
        ["heal", "p2"],
        ["fault", "undo", "3"],
    ):
        assert laglab(controller, *args).exit_code == 0
    assert [(m, p) for m, p, _ in controller.requests] == [
        ("DELETE", "/api/shaping"), ("DELETE", "/api/shaping/mysql-source?peer=mysql-target"), ("DELETE", "/api/partitions"),
        ("DELETE", "/api/partitions/p2"), ("DELETE", "/api/faults/f3")]  # fmt: skip


def test_partition_takes_two_comma_lists_around_a_double_dash(controller):
    controller.answer("POST /api/partitions", {"id": "p1", "a": ["gr-node1", "gr-node2"], "b": ["gr-node3"], "oneway": True, "expires_in": "60s"}, 201)  # fmt: skip
    result = laglab(controller, "partition", "gr-node1,gr-node2", "--", "gr-node3", "--oneway", "--for", "60s")
    assert result.exit_code == 0, result.output
    assert controller.requests == [("POST", "/api/partitions", {"a": ["gr-node1", "gr-node2"], "b": ["gr-node3"], "oneway": True, "duration": "60s"})]  # fmt: skip
    assert result.output == "partition p1: gr-node1,gr-node2 -> gr-node3 cut, heals in 60s\n"


def test_fault_actions_are_the_controllers(controller):
    controller.answer("POST /api/faults", {"id": "1", "service": "mysql-source", "action": "kill", "duration_seconds": 20.0, "effect_ms": 41.0, "undo": "start"}, 201)  # fmt: skip
    result = laglab(controller, "fault", "kill", "mysql-source", "--for", "20s")
    assert result.exit_code == 0, result.output
    assert controller.requests == [
        ("POST", "/api/faults", {"service": "mysql-source", "action": "kill", "duration": "20s"})
    ]
    assert "undone by start after 20 s" in result.output
    from laglab.faults import ACTIONS

    assert set(cli.commands["fault"].commands) == {*ACTIONS, "list", "undo"}


def test_preset_applies_its_round_trip_and_each_sides_rate(controller):
    """dsl in presets.yaml: {rtt: 50ms, down: 1500kbit, up: 384kbit}: half the round trip each way, A
    sends at `up`. The table is the shipped file, read by the command itself (#36.3: listing presets
    needed the lab)."""
    controller.answer("PUT /api/shaping/loadgen", shaping_answer("loadgen", "mysql-source"))
    controller.answer("PUT /api/shaping/mysql-source", shaping_answer("mysql-source", "loadgen"))
    assert laglab(controller, "preset", "dsl", "--link", "loadgen", "mysql-source").exit_code == 0
    assert controller.requests == [
        ("PUT", "/api/shaping/loadgen", {"delay": "25ms", "rate": "384kbit", "peer": "mysql-source"}),
        ("PUT", "/api/shaping/mysql-source", {"delay": "25ms", "rate": "1500kbit", "peer": "loadgen"}),
    ]
    result = laglab(controller, "preset", "nosuch", "--link", "a", "b")
    assert result.exit_code == 2 and "no preset 'nosuch'" in result.output


def test_presets_list_without_a_lab():
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "preset"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^dsl\s+50ms\s+384kbit\s+1500kbit\s+access$", result.output, re.M)
    assert re.search(r"^us-east-1/eu-west-1\s+[\d.]+ms\s", result.output, re.M)
    assert "sources:" in result.output and "regions (" in result.output


def test_clear_a_link_clears_both_directions(controller):
    for a, _b in (("mysql-source", "mysql-target"), ("mysql-target", "mysql-source")):
        controller.answer(f"DELETE /api/shaping/{a}", None, 204)
    result = laglab(controller, "clear", "--link", "mysql-source", "mysql-target")
    assert result.exit_code == 0, result.output
    assert [(m, p) for m, p, _ in controller.requests] == [
        ("DELETE", "/api/shaping/mysql-source?peer=mysql-target"),
        ("DELETE", "/api/shaping/mysql-target?peer=mysql-source"),
    ]
    assert laglab(controller, "clear", "mysql-source", "--link", "a", "b").exit_code == 2


def test_lag_prints_a_table_and_json(controller):
    controller.answer("GET /api/lag", {"latest": SAMPLE})
    result = laglab(controller, "lag")
    assert result.exit_code == 0
    header, row = result.output.splitlines()
    assert header.split()[:4] == ["time", "(UTC)", "replica", "lag"]
    assert row.split()[:4] == ["18:00:00.123", "mysql-target", "250.0", "ms"]
    assert controller.requests[0][1] == "/api/lag?seconds=0"
    as_json = laglab(controller, "--json", "lag", "--replica", "gr-node2")
    assert json.loads(as_json.output) == SAMPLE
    assert controller.requests[1][1] == "/api/lag?seconds=0&replica=gr-node2"


@pytest.mark.parametrize("state", ["asleep between samples", "a request in flight"])
def test_ctrl_c_ends_lag_follow_at_once_with_exit_0(controller, state):
    """README: "Ctrl-C stops watching". The real command in its own process, SIGINT as a terminal sends
    it, in each state the loop can be in: sleeping between samples, or waiting for an answer that does
    not come (a busy controller)."""
    controller.answer("GET /api/lag", {"latest": SAMPLE})
    argv = [sys.executable, "-m", "laglab.cli", "--url", controller.url, "--token", "", "lag", "--follow",
            "--interval", "0.5"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          preexec_fn=ctrl_c_in_a_terminal) as process:  # fmt: skip
        try:
            assert process.stdout.readline().split()[:2] == ["time", "(UTC)"]
            assert "mysql-target" in process.stdout.readline()
            # The sample just printed: it is now in its 0.5 s sleep, unless the next request is held.
            if state == "a request in flight":
                controller.answering.clear()
                wait_until(lambda: controller.held, 5, 0.01, "the next request to be held")
            process.send_signal(signal.SIGINT)
            started = time.monotonic()
            code = process.wait(timeout=10)
            took = time.monotonic() - started
        finally:
            controller.answering.set()
            if process.poll() is None:
                process.kill()
        stderr = process.stderr.read()
    assert code == 0 and took < 2.0, (code, took, stderr)
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr


def test_lag_is_a_failed_check_while_replication_does_not_flow(controller):
    controller.answer(
        "GET /api/lag", {"latest": {**SAMPLE, "status": "gap", "reason": "target unreachable", "lag_seconds": None}}
    )
    result = laglab(controller, "lag")
    assert result.exit_code == 1
    assert "target unreachable" in result.output


def test_consistency_not_identical_is_exit_1(controller):
    body = {"identical": False, "flavor": "mysql", "gtid": {}, "differences": ["sbtest1: checksum differs"],
            "tables": [{"table": "sbtest1", "source": {"rows": 10}, "target": {"rows": 9}, "identical": False}]}  # fmt: skip
    controller.answer("GET /api/consistency", body)
    result = laglab(controller, "consistency", "--timeout", "5")
    assert result.exit_code == 1
    assert "NOT identical" in result.output
    assert controller.requests == [("GET", "/api/consistency?timeout=5", None)]
    controller.answer("GET /api/consistency", {**body, "identical": True, "differences": []})
    assert laglab(controller, "consistency").exit_code == 0


def test_every_command_has_help_with_an_example():
    def walk(group: click.Group, prefix: tuple[str, ...] = ()):
        for name, command in group.commands.items():
            yield (*prefix, name), command
            if isinstance(command, click.Group):
                yield from walk(command, (*prefix, name))

    for path, _command in walk(cli):
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Example" in result.output, f"laglab {' '.join(path)} --help has no example"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts(shell):
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0
    assert "_LAGLAB_COMPLETE" in result.output
    assert f"{shell}_complete" in result.output


def test_the_controller_package_has_the_laglab_console_entry_point():
    """scripts/venv installs the package (editable, no dependencies): .venv/bin/laglab is the command."""
    import subprocess
    import sys
    from importlib.metadata import entry_points
    from pathlib import Path

    (entry,) = [e for e in entry_points(group="console_scripts") if e.name == "laglab"]
    assert entry.value == "laglab.cli:main"
    done = subprocess.run([str(Path(sys.executable).with_name("laglab")), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("Usage: laglab "), done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["fault", "kill", "mysql-source", "--for", "20"],
        ["partition", "mysql-source", "mysql-target", "--for", "60"],
        ["shape", "mysql-source", "--delay", "100"],
        ["shape", "--link", "mysql-source", "mysql-target", "--rtt", "180"],
    ],
)
def test_a_bare_number_where_a_time_is_meant_is_a_usage_error_naming_the_units(argv):
    """#36: `--for 20` was 20 us (tc's unit), `--delay 100` 0.1 ms; nothing reaches the controller."""
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert "has no unit" in result.output and "(units: us, ms, s, m, h)" in result.output


def test_every_help_example_parses_as_written(monkeypatch, tmp_path):
    """#36.2: `laglab run scenarios/customer-example.yaml` (no such file), `show mysql-source --json`
    ('No such option'), `fault undo 3`, `matrix three-regions.yaml`: each example is parsed here as click
    parses it (files must exist, from the checkout's root), without calling the controller."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    examples = [shlex.split(e.command)[1:] for e in help_examples() if e.command.startswith("./laglab ")]
    assert len(examples) > 40
    (tmp_path / "results" / "RUN").mkdir(parents=True)  # the one placeholder an example has
    for args in examples:
        parse_cli([str(tmp_path / a) if a == "results/RUN" else a for a in args])


def test_a_ticket_becomes_a_scenario_file_that_validates(tmp_path):
    """#36.4: one command from a ticket's numbers to a scenario to edit and run (no lab needed)."""
    from laglab.scenarios.plan import load_file

    out = tmp_path / "ticket-4711.yaml"
    args = ["scenario", "new", "ticket-4711", "--rtt", "180ms", "--rate", "2mbit", "--loss", "0.1%",
            "--write-rate", "150", "--threads", "8", "--server", "mysql 8.0.32",
            "--symptom", "lag grows after 10 minutes", "--expect", "lag_slope > 0.01", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    plan, quick = load_file(out), load_file(out, quick=True)
    s = plan.points[0].scenario
    assert (s.link.rtt, s.link.rate_bits, s.link.loss, s.load.rate, s.load.threads) == (0.18, 2e6, "0.1%", 150, 8)
    assert [str(a) for a in s.assertions] == ["lag_slope > 0.01"]
    assert s.description == "lag grows after 10 minutes (server mysql:8.0.32)"
    # #53: pinned to the customer's server, the outcome in the ticket's words, 10 minutes by default
    assert (s.servers.source, s.servers.target) == ("mysql:8.0.32", "mysql:8.0.32")
    assert s.verdict.words() == ("reproduced", "not reproduced") and s.load.duration == 600.0
    assert (quick.points[0].scenario.load.duration, quick.points[0].scenario.warmup) == (20.0, 3.0)
    assert s.expected == "the symptom reproduces: lag_slope > 0.01 in every point, nothing lost"
    assert CliRunner().invoke(cli, args).exit_code != 0, "an existing file is kept without --force"
    bad = CliRunner().invoke(
        cli, [*args[:3], "--rtt", "180ms", "--rate", "2", "--write-rate", "150", "-o", str(tmp_path / "x.yaml")]
    )
    assert bad.exit_code == 2 and "link.rate" in bad.output and not (tmp_path / "x.yaml").exists()


def test_a_tickets_onset_runs_the_load_past_it_and_the_file_is_the_users(tmp_path, monkeypatch):
    """#53: `scenario new` defaulted to 600 s, exactly when the customer's lag starts, and wrote into
    scenarios/ (a "shipped" scenario, one `git add -A` from being committed). --onset runs past it; the
    file goes to scenarios/tickets/, which git ignores and `scenario list` shows as yours; --profile
    takes the customer's binlog profile as the load, from under scenarios/ where the controller reads it."""
    scenario_cli = importlib.import_module("laglab.cli.scenario")  # the module; laglab.cli.scenario is the group
    from laglab.scenarios.plan import load_file

    scenarios = tmp_path / "scenarios"
    (scenarios / "profiles").mkdir(parents=True)
    shutil.copy(ROOT / "scenarios" / "profiles" / "nightly-batch.json", scenarios / "profiles" / "batch.json")
    monkeypatch.setattr(scenario_cli, "SCENARIOS", scenarios)
    monkeypatch.setattr(scenario_cli, "TICKETS", scenarios / "tickets")
    monkeypatch.setattr(scenario_cli, "ROOT", tmp_path)
    args = ["scenario", "new", "t", "--rtt", "180ms", "--rate", "2Mbps", "--onset", "10m",
            "--profile", str(scenarios / "profiles" / "batch.json")]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wrote scenarios/tickets/t.yaml: rtt 180ms, rate 2Mbps, the replay of ")
    point = load_file(scenarios / "tickets" / "t.yaml").points[0]
    s = point.scenario
    assert (s.onset, s.load.duration, s.load.tool, s.link.rate_bits) == (600.0, 900.0, "profile", 2e6)  # 15m
    # named as the controller reads it (under its scenarios folder), and read from there
    assert s.load.file == "profiles/batch.json" and point.plan().load.profile is not None
    assert "scenarios/tickets/" in (ROOT / ".gitignore").read_text().split()
    listed = CliRunner().invoke(cli, ["scenario", "list", "-o", "json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["scenarios"] == [
        {"file": "scenarios/tickets/t.yaml", "whose": "yours", "points": 1, "error": None,
         "description": "(the ticket's symptom)",
         "expected": "the symptom reproduces: lag_slope > 0.01 in every point, nothing lost"},
    ]  # fmt: skip
    outside = CliRunner().invoke(cli, [*args[:-1], str(tmp_path / "elsewhere.json"), "-o", str(tmp_path / "x.yaml")])
    assert outside.exit_code == 2 and "put it under scenarios/" in outside.output, outside.output
    both = CliRunner().invoke(cli, [*args, "--write-rate", "150", "--force"])
    assert both.exit_code == 2 and "--write-rate (sysbench) or --profile" in both.output, both.output


def test_the_shipped_scenarios_are_listed_with_what_they_reproduce():
    result = CliRunner().invoke(cli, ["scenario", "list"])
    assert result.exit_code == 0
    assert "scenarios/customer-example-rtt180-2mbit.yaml" in result.output and "Ticket #1234" in result.output
    assert "invalid" not in result.output


def test_runs_stop_interrupts_the_run_in_progress(controller):
    going = {"id": "r2", "step": "load", "results": "results/r2", "status": "running"}
    controller.answer("GET /api/runs", {"runs": [{"id": "r1", "step": "done"}, going]})
    controller.answer("DELETE /api/runs/r2", {**going, "status": "interrupted"}, 202)
    result = laglab(controller, "runs", "stop")
    assert result.exit_code == 0, result.output
    assert controller.requests[-1][:2] == ("DELETE", "/api/runs/r2")
    assert "stopping run r2" in result.output
    controller.answer("GET /api/runs", {"runs": [{"id": "r1", "step": "done"}]})
    result = laglab(controller, "runs", "stop")
    assert result.exit_code == 3 and "no run in progress" in result.output
    controller.answer("GET /api/runs/r1", {"id": "r1", "step": "done"})
    result = laglab(controller, "runs", "stop", "r1")
    assert result.exit_code == 3 and "has finished" in result.output
    assert [r for r in controller.requests if r[0] == "DELETE"] == [("DELETE", "/api/runs/r2", None)]


def test_durations_read_as_durations_and_the_version():
    """#36.3: `ETA 12:59` read as a clock time."""
    from laglab.cli.runs import clock

    assert [clock(s) for s in (0, 45, 779, 3900)] == ["0 s", "45 s", "12 min 59 s", "1 h 05 min"]
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and re.fullmatch(r"laglab \d+\.\d+\.\d+\n", result.output), result.output


def test_fault_undo_without_an_id_ends_every_fault_in_force(controller):
    active = [{"id": "f1", "service": "mysql-target", "action": "pause", "duration_seconds": None, "effect_ms": 3.0,
               "undo": "unpause", "active": True}]  # fmt: skip
    controller.answer("GET /api/faults", {"active": active, "recent": active})
    controller.answer("DELETE /api/faults/f1", {**active[0], "active": False}, 202)
    result = laglab(controller, "fault", "undo")
    assert result.exit_code == 0, result.output
    assert [(m, p) for m, p, _ in controller.requests] == [("GET", "/api/faults"), ("DELETE", "/api/faults/f1")]
    assert "undone: fault f1: pause mysql-target" in result.output
    controller.answer("POST /api/faults", active[0], 201)
    assert "in force until: laglab fault undo f1" in laglab(controller, "fault", "pause", "mysql-target").output


def test_fault_list_shows_each_fault_once_with_clock_times(controller):
    """FaultManager.listing() names a fault in force under `active` and under `recent` (every fault asked
    lately): the table listed it twice, and `undone` as a full ISO stamp beside `asked`'s clock time."""
    now = {"id": "f2", "service": "mysql-target", "action": "pause", "asked": "2026-11-27T06:10:38.120000Z",
           "undone": None, "active": True}  # fmt: skip
    over = {**now, "id": "f1", "asked": "2026-11-27T06:09:31.010000Z", "undone": "2026-11-27T06:09:31.670138Z",
            "active": False}  # fmt: skip
    controller.answer("GET /api/faults", {"active": [now], "recent": [now, over]})
    lines = laglab(controller, "fault", "list").output.splitlines()
    assert [line.split() for line in lines[1:]] == [
        ["f2", "mysql-target", "pause", "active", "06:10:38", "-"],
        ["f1", "mysql-target", "pause", "over", "06:09:31", "06:09:31"],
    ], lines


def test_status_names_each_servers_version(controller):
    """#39: the version each server reports, as the recorder found it, on `laglab status`'s first lines."""
    controller.answer("GET /api/health", {
        "status": "ok", "authenticated": True, "run": "20261127T000000Z-live", "problems": [],
        "shaping": {"backend": "userspace", "netem_available": False},
        "recorder": {"interval_ms": 100, "latest": None,
                     "servers": {"mysql-source": "MariaDB 10.5.23", "mysql-target": "MariaDB 11.8.9"}},
    })  # fmt: skip
    controller.answer("GET /api/containers", {"containers": []})
    controller.answer("GET /api/faults", {"active": [], "recent": []})
    controller.answer("GET /api/partitions", {"partitions": []})
    controller.answer("GET /api/load", {"running": False})
    controller.answer("GET /api/runs", {"runs": []})
    done = laglab(controller, "status")
    assert done.exit_code == 0, done.output
    assert "servers     mysql-source MariaDB 10.5.23, mysql-target MariaDB 11.8.9\n" in done.output


def test_reset_puts_the_lab_back_one_line_a_step_and_leaves_a_run_to_its_cleanup(controller):
    """#53: toxiproxy users look for one reset. The answers are the controller's own: DELETE of
    partitions, the matrix and shaping answer 204 with no body (tests/integration/conftest.py asserts
    so on the lab); the panel's load and each fault are ended by their own DELETE."""
    controller.answer("GET /api/runs", {"runs": [{"id": "r9", "step": "load (measuring)"}]})
    controller.answer("GET /api/load", {"running": True, "owner": "panel"})
    controller.answer("DELETE /api/load", {"running": False})
    controller.answer("GET /api/faults", {"active": [{"id": "f3", "service": "mysql-target", "action": "pause"}]})
    controller.answer("DELETE /api/faults/f3", {"id": "f3"})
    for path in ("/api/partitions", "/api/matrix", "/api/shaping"):
        controller.answer(f"DELETE {path}", None, 204)
    result = laglab(controller, "reset")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "load: stopped", "faults: 1 undone", "partitions: healed", "delay matrix: cleared", "shaping: cleared",
        "run r9: still in progress (laglab runs stop ends it and cleans up)",
    ]  # fmt: skip
    deleted = [r[1] for r in controller.requests if r[0] == "DELETE"]
    assert deleted == ["/api/load", "/api/faults/f3", "/api/partitions", "/api/matrix", "/api/shaping"]
    controller.answer("DELETE /api/shaping", {"error": "shaping: the kernel refused", "status": 500}, 500)
    failed = laglab(controller, "reset")
    assert failed.exit_code == 3 and "DELETE /api/shaping: shaping: the kernel refused (500)" in failed.output


def test_help_is_grouped_with_whole_lines_and_every_command_in_one_section():
    """#53: `laglab --help` listed 22 commands alphabetically with their help cut at 45 characters."""
    from laglab.cli import SECTIONS

    placed = [name for _title, names in SECTIONS for name in names]
    assert sorted(placed) == sorted(cli.commands) and len(placed) == len(set(placed)), "each command in one section"
    shown = CliRunner().invoke(cli, ["--help"]).output
    for title, names in SECTIONS:
        assert f"\n{title}:\n" in shown, title
        for name in names:
            first = cli.commands[name].get_short_help_str(limit=1000)
            assert " ".join(first.split()) in " ".join(shown.split()), (name, first)  # whole, never "..."
    assert "..." not in shown.split("Exit codes")[0].split("\n", 1)[1]  # (the usage line has its own)


def test_a_usage_error_is_one_line_naming_the_commands_help():
    """docs/cli.md promises one line on stderr; click printed Usage, a hint and the error on three."""
    done = subprocess.run([sys.executable, "-m", "laglab.cli", "shape", "mysql-target", "--latency", "5ms"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == EXIT_CODES["usage"] == 2
    (line,) = done.stderr.splitlines()  # click 8.2's own words, then where to look
    assert line.startswith("laglab: error: No such option '--latency'.") and line.endswith(" (see laglab shape --help)")
