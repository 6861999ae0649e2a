"""#40.2 on the lab, through the README's commands: a seeded run loses the same packets again; another
seed loses others; the seed, asked or drawn, is recorded.

The link is loadgen <-> mysql-target with no load: nothing else crosses it, so the first packets its
generators draw for are the verification's 20 pings (replication's own stream would interleave with
them on mysql-source <-> mysql-target, and its packet count is not the same twice)."""

import json
import re
import subprocess

import pytest

from .conftest import ROOT

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

SCENARIO = """name: seeded-loss
description: 20 % loss each way between loadgen and mysql-target, no load
link: {between: [loadgen, mysql-target], loss: 20%}
load: {tool: none, duration: 1s}
warmup: 0s
seed: 1234
"""


def seeded_run(path, *args: str) -> tuple[list[int], dict]:
    """`laglab run FILE [args]`: the pings its verification lost, and its run.json."""
    done = subprocess.run(
        [str(ROOT / "laglab"), "run", str(path), *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    match = re.search(r"-> (results/\S+)", done.stdout)
    assert match and done.returncode == 0, done.stdout[-3000:] + done.stderr
    folder = ROOT / match.group(1)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "completed", summary.get("reason")
    rtt = summary["points"][0]["verification"]["rtt"]
    assert rtt["sent"] == 20
    return rtt["lost"], json.loads((folder / "run.json").read_text()) | {"report": (folder / "report.md").read_text()}


def test_one_seed_loses_the_same_pings_again_and_another_seed_others(api, tmp_path):
    path = tmp_path / "seeded-loss.yaml"
    path.write_text(SCENARIO)
    first, meta = seeded_run(path)
    again, _ = seeded_run(path)
    other, other_meta = seeded_run(path, "--seed", "4321")
    print(f"seed 1234 lost {first}, again {again}; seed 4321 lost {other}")
    # 1 - 0.8^2 = 36 % of 20 pings lost on average (request or reply): drawn, not a pattern.
    assert first == again and 1 <= len(first) <= 15, (first, again)
    assert other != first, other
    assert (meta["seed"], meta["seed_asked"], meta["seed_applies"], meta["seed_note"]) == (1234, 1234, "yes", None)
    assert (other_meta["seed"], other_meta["seed_asked"]) == (4321, 4321)  # --seed over the file's
    assert "| seed | 1234 |" in meta["report"]
    assert api.get("/api/shaping").json()["shaping"] == []  # cleared after each run


def test_a_random_seed_is_drawn_and_recorded(api, tmp_path):
    path = tmp_path / "drawn.yaml"
    path.write_text(SCENARIO.replace("seed: 1234\n", ""))
    _, meta = seeded_run(path)
    assert meta["seed_asked"] == "random" and 0 <= meta["seed"] <= 2**32 - 1 and meta["seed_applies"] == "yes"
    assert f"| seed | {meta['seed']} (drawn: the scenario said `random`) |" in meta["report"]
