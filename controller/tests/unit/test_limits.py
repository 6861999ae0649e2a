"""#35: every request is bounded, and a request over a bound is answered at once with a 4xx naming it.

Each case is one that exhausted the controller on the lab before: a 15 KB sweep of 10^9 points, a
looping trace of rows at one t, a YAML alias bomb, a timeline repeating every 100 ms for a day, eight
ten-minute consistency checks, an unbounded number of faults and partitions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from laglab import limits
from laglab.errors import status_of
from laglab.faults import FaultError
from laglab.scenarios.plan import load_text
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.manager import ShapingError

from .test_faults import FakeContainers
from .test_manager import LAB, manager

DOCS = Path(__file__).resolve().parents[3] / "docs"


def refused(text: str) -> ScenarioError:
    started = time.process_time()
    with pytest.raises(ScenarioError) as caught:
        load_text(text)
    # CPU seconds, not wall time: a busy host cannot make this fail, a plan built whole would (minutes).
    assert time.process_time() - started < 5, "the plan's size must be known before it is built"
    return caught.value


def test_a_sweep_of_a_billion_points_is_refused_before_it_is_built():
    rates = ", ".join(f"{n}mbit" for n in range(1, 1001))
    rtts = ", ".join(f"{n}ms" for n in range(1, 1001))
    threads = ", ".join(str(n) for n in range(1, 1001))
    text = f"name: x\nsweep:\n  link.rate: [{rates}]\n  link.rtt: [{rtts}]\n  load.threads: [{threads}]\n"
    assert len(text) < 25_000
    error = refused(text)
    assert error.path == "sweep" and "1000 x 1000 x 1000 values = 1000000000 points" in error.message
    assert f"at most {limits.POINTS}" in error.message and "limit points" in error.message


def test_a_search_counts_its_probes_in_the_plans_size():
    text = (
        "name: x\nload: {rate: 100}\nsearch: {param: link.rate, from: 1mbit, to: 100mbit, max_probes: 12}\n"
        "sweep:\n  link.rtt: [" + ", ".join(f"{n}ms" for n in range(1, 201)) + "]\n"
    )
    error = refused(text)
    assert error.path == "sweep" and "probes" in error.message and "limit points" in error.message


def test_an_alias_bomb_is_refused_by_its_expanded_size():
    lines = ["name: x", "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    error = refused("\n".join(lines) + "\n")
    assert f"more than {limits.YAML_NODES} values" in error.message


def merge_bomb(mappings: int) -> str:
    """#54's request: each mapping merges the one before (`<<: *m(k-1)`) and the document names them all,
    so what PyYAML builds grows with the square of the text: 3200 of them (247 KB) expanded to about 48
    million keys inside yaml.safe_load and the controller was OOM-killed in 26 s."""
    lines = ["name: x", "m0: &m0 {a0: 1, b0: 2, c0: 3, d0: 4}"]
    lines += [f"m{k}: &m{k} {{<<: *m{k - 1}, a{k}: 1, b{k}: 2, c{k}: 3, d{k}: 4}}" for k in range(1, mappings)]
    return "\n".join(lines) + "\n"


def test_a_merge_key_bomb_is_refused_before_it_is_built():
    text = merge_bomb(3200)
    assert 200_000 < len(text) < limits.SCENARIO_BYTES
    error = refused(text)  # within 5 CPU seconds, and nothing built (tracemalloc below)
    assert error.message == f"nested deeper than {limits.YAML_DEPTH} levels (limit yaml_depth)"  # 3200 merges deep
    # The same growth kept shallow: each level merges four copies of the one before (4^12 keys).
    wide = ["name: x", "l0: &l0 {a: 1, b: 2}"] + [f"l{k}: &l{k} {{<<: [*l{k - 1}, *l{k - 1}, *l{k - 1}, *l{k - 1}], k{k}: 1}}"
                                                 for k in range(1, 13)]  # fmt: skip
    assert refused("\n".join(wide) + "\n").message == (
        f"holds more than {limits.YAML_NODES} values once its aliases are expanded"
    )
    import tracemalloc

    tracemalloc.start()
    try:
        refused(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB to refuse it: its expansion was built"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("name: x\nnested: " + "[" * 1000 + "]" * 1000 + "\n", f"nested deeper than {limits.YAML_DEPTH} levels"),
        ("name: x\nnested: " + "[" * 100 + "]" * 100 + "\n", f"nested deeper than {limits.YAML_DEPTH} levels"),
        ("name: x\nloop: &a [1, *a]\n", "an alias names a node that holds it"),
        (
            "".join(f"m{k}: &m{k} {{<<: *m{k - 1}}}\n" if k else "m0: &m0 {a: 1}\n" for k in range(200)) + "name: x\n",
            f"nested deeper than {limits.YAML_DEPTH} levels",
        ),
    ],
    ids=["1000 deep (RecursionError before: HTTP 500)", "100 deep", "an alias inside itself", "a chain of 200 merges"],
)
def test_yaml_nested_or_aliased_too_deep_is_refused_by_name(text, said):
    """#54: YAML nested 1000 deep answered HTTP 500 (RecursionError) for POST /api/runs, and one such
    file in scenarios/ broke GET /api/scenarios for every scenario; a merge chain recursed in PyYAML's
    flatten_mapping. Each is refused naming what, before anything is built."""
    assert refused(text).message.startswith(said)


def test_what_is_within_the_limits_reads_as_yaml_safe_load_reads_it():
    import yaml

    from laglab.scenarios.schema import yaml_text

    text = "a: &a {x: 1, y: [1, 2]}\nb: {<<: *a, y: [3]}\nc: [*a, *a]\nd: !!str 5\ne: 2026-12-07\n"
    assert yaml_text.parse(text) == yaml.safe_load(text)
    assert yaml_text.parse("") is None and yaml_text.parse("# nothing\n") is None


def test_json_nested_too_deep_is_a_400_naming_the_limit(client):
    """#54: a JSON body 100,000 levels deep answered HTTP 500 (RecursionError in json.loads)."""
    for body in ("[" * 100_000 + "]" * 100_000, '{"a": ' * 100 + "1" + "}" * 100):
        answer = client.put("/api/shaping/mysql-target", data=body, content_type="application/json")
        assert answer.status_code == 400, answer.get_data(as_text=True)[:300]
        assert answer.get_json() == {"error": f"body: nested deeper than {limits.JSON_DEPTH} levels (limit json_depth)",
                                     "status": 400}  # fmt: skip


def test_a_scenario_over_its_size_is_refused():
    error = refused("name: x\ndescription: '" + "x" * limits.SCENARIO_BYTES + "'\n")
    assert f"at most {limits.SCENARIO_BYTES}" in error.message


def test_a_looping_trace_whose_rows_share_one_t_is_refused():
    """Its period was 0: the schedule's pass loop appended forever in the run thread."""
    error = refused(
        "name: x\nload: {duration: 60s}\ntimeline:\n  - at: 0s\n    trace:\n      link: [mysql-source, mysql-target]\n"
        "      loop: true\n      rows: [{t: 0s, delay: 10ms}, {t: 0s, delay: 20ms}]\n"
    )
    assert error.path.endswith("rows.1.t") and "must grow by at least 0.1s a row" in error.message


def test_a_timeline_that_schedules_too_much_is_refused_before_anything_is_scheduled():
    error = refused(
        "name: x\nload: {duration: 86400s}\ntimeline:\n"
        "  - {at: 0s, every: 100ms, shaping: {link: [mysql-source, mysql-target], delay: 10ms}}\n"
    )
    assert error.path.startswith("timeline") and f"more than {limits.TIMELINE_EVENTS} changes" in error.message
    looping = refused(
        "name: x\nload: {duration: 86400s}\ntimeline:\n  - at: 0s\n    trace:\n      link: [mysql-source, mysql-target]\n"
        "      loop: true\n      rows: [{t: 0s, delay: 10ms}, {t: 100ms, delay: 20ms}]\n"
    )
    assert "more than" in looping.message and "trace rows counted" in looping.message
    fine = load_text(
        "name: x\nload: {duration: 60s}\ntimeline:\n"
        "  - {at: 0s, every: 1s, duration: 500ms, shaping: {link: [mysql-source, mysql-target], delay: 10ms}}\n"
    )
    assert len(fine.scenario.timeline[0].occurrences(60.0)) == 60


def test_the_load_goes_to_the_labs_servers_only():
    """sysbench sends the lab's account to whatever host `target` names."""
    error = refused("name: x\nload: {target: attacker.example}\n")
    assert error.path == "load.target" and "mysql-source" in error.message


def test_a_body_over_the_limit_is_413_naming_it(client):
    answer = client.post("/api/runs", data=b"{" + b" " * limits.BODY_BYTES + b"}", content_type="application/json")
    assert (answer.status_code, answer.json["status"]) == (413, 413)
    assert answer.json["error"] == f"body: larger than {limits.BODY_BYTES} bytes (limit body)"


def test_a_scenario_text_over_the_limit_is_400_naming_the_field(client):
    answer = client.post("/api/runs", json={"scenario": "name: x\n#" + "x" * limits.SCENARIO_BYTES})
    assert answer.status_code == 400 and answer.json["error"].startswith("scenario:")


def test_faults_with_a_duration_are_bounded():
    from laglab.faults import FaultManager

    faults = FaultManager(FakeContainers(), settle_timeout=2)
    faults.platform.client.states["id-target"]["Running"] = True
    made = []
    for _ in range(limits.ACTIVE_FAULTS):
        made.append(faults.inject("mysql-target", "pause", duration=600))
        faults.platform.client.states["id-target"]["Paused"] = False  # let the next one find it running
    with pytest.raises(FaultError) as caught:
        faults.inject("mysql-target", "pause", duration=600)
    assert status_of(caught.value) == 409 and "limit active_faults" in caught.value.message
    for fault in made:
        fault._timer.cancel()


def test_partitions_are_bounded_and_a_member_is_named_once(tmp_path):
    lab = dict(LAB)
    m = manager(__import__("laglab.shaping.backends", fromlist=["x"]).KernelBackend(), tmp_path, lab)
    with pytest.raises(ShapingError) as caught:
        m.partition(["mysql-source", "mysql-source"], ["mysql-target"])
    assert status_of(caught.value) == 422 and caught.value.message == "a: mysql-source named more than once"
    for _ in range(limits.PARTITIONS):
        m.partition(["mysql-source"], ["mysql-target"], oneway=True)
    with pytest.raises(ShapingError) as caught:
        m.partition(["mysql-source"], ["mysql-target"])
    assert status_of(caught.value) == 409 and "limit partitions" in caught.value.message


def test_one_consistency_check_at_a_time(app, client, monkeypatch):
    """Eight of them held every server thread for up to ten minutes; the second is 409 at once."""
    from laglab.replicators import consistency

    inside, release = threading.Event(), threading.Event()

    def slow_check(source, target, timeout):
        inside.set()
        release.wait(10)
        return {"identical": True, "flavor": "mysql", "gtid": {}, "tables": [], "differences": []}

    monkeypatch.setattr(consistency, "check", slow_check)
    answers = []
    first = threading.Thread(target=lambda: answers.append(client.get("/api/consistency?timeout=600")))
    first.start()
    assert inside.wait(10)
    second = client.get("/api/consistency?timeout=600")
    release.set()
    first.join(10)
    assert (second.status_code, second.json["status"]) == (409, 409) and "limit long_checks" in second.json["error"]
    assert answers[0].status_code == 200
    assert client.get("/api/consistency?timeout=1").status_code == 200  # free again once it ended


def test_docs_name_every_limit_with_its_value():
    text = (DOCS / "api.md").read_text()
    for limit in limits.LIMITS.values():
        assert f"| `{limit.name}` | {limit.value} {limit.unit} |" in text, f"docs/api.md lacks the limit {limit.name}"


def test_the_controllers_memory_is_bounded_as_the_docs_say():
    import yaml

    compose = yaml.safe_load((DOCS.parent / "compose.yaml").read_text())
    assert compose["services"]["controller"]["mem_limit"] == f"{limits.CONTROLLER_MEMORY // 1024}g"


def test_the_openapi_document_states_every_limit():
    from laglab.api.openapi import document

    text = document()["info"]["description"]
    assert all(f"{limit.name} {limit.value} {limit.unit}" in text for limit in limits.LIMITS.values())


def test_a_run_whose_folder_cannot_be_made_is_a_503_and_the_next_may_start(app, client, tmp_path):
    """#54: results/ unwritable when a run starts answered HTTP 500. Here its folder is under a file, so
    the kernel refuses the mkdir itself (ENOTDIR), as it refuses one on a full or read-only disk."""
    (tmp_path / "a-file").write_text("")
    app.config["RESULTS_DIR"] = str(tmp_path / "a-file" / "results")
    answer = client.post("/api/runs", json={"scenario": "name: x\nload: {tool: none, duration: 1s}\n"})
    assert answer.status_code == 503, answer.get_json()
    assert answer.get_json()["error"].startswith("results: the run's folder cannot be written: Not a directory")
    from laglab.api.parts import lab_of

    assert lab_of(app).runs == {}  # nothing half-made is left to block the next run
