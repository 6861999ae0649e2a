"""The one impairment type: its merge rule, its renderers, and that the worker can import it alone."""

import json
import subprocess
import sys
from pathlib import Path

from laglab.shaping.impairment import Impairment
from laglab.shaping.kernel import KernelBackend
from laglab.shaping.nfqueue import Rule
from laglab.shaping.params import parse_request


def test_settings_on_the_same_packets_add_up_once():
    a = Impairment(delay=0.125, jitter=0.01, loss=0.1, rate=2e6, reorder=0.2, gap=3)
    b = Impairment(delay=0.0625, loss=0.5, rate=1e6, duplicate=0.01, distribution="normal")
    merged = a.plus(b)
    assert (merged.delay, merged.jitter, merged.rate, merged.reorder, merged.gap) == (0.1875, 0.01, 1e6, 0.2, 3)
    assert abs(merged.loss - 0.55) < 1e-12 and merged.duplicate == 0.01 and merged.distribution == "normal"
    assert Impairment(rate=1e6).plus(Impairment()) == Impairment(rate=1e6)


def test_what_a_receiver_holds_is_everything_but_the_rate():
    assert Impairment(rate=2e6).held() is None
    assert Impairment(delay=0.1, rate=2e6).held() == Impairment(delay=0.1)


def test_one_body_renders_for_the_api_tc_and_the_worker():
    body = {"delay": "40ms", "jitter": "4ms", "correlation": "25%", "distribution": "pareto", "loss": "1%",
            "reorder": "5%", "gap": 3, "duplicate": "0.1%", "rate": "2mbit"}  # fmt: skip
    impairment = parse_request(body).shaping
    assert impairment.to_json() == body
    assert parse_request(impairment.to_json()).shaping == impairment
    assert KernelBackend.netem_args(impairment, 2e6) == [
        "netem", "limit", "1000", "delay", "40ms", "4ms", "25%", "distribution", "pareto",
        "loss", "1%", "25%", "duplicate", "0.1%", "25%", "reorder", "5%", "25%", "gap", "3",
    ]  # fmt: skip
    wire = json.loads(json.dumps(impairment.to_wire()))
    assert Impairment.from_wire(wire) == impairment
    assert Rule(Impairment.from_wire(wire)).spec == impairment


def test_a_gemodel_survives_the_wire_as_a_tuple():
    impairment = Impairment(gemodel=(0.01, 0.25, 1.0, 0.0))
    assert Impairment.from_wire(json.loads(json.dumps(impairment.to_wire()))) == impairment


def test_the_worker_imports_it_with_the_standard_library_alone():
    code = (
        "import sys, laglab.shaping.nfqueue;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'flask', 'docker', 'yaml')"
        " or m in ('laglab.errors', 'laglab.shaping.params')))"
    )
    controller = Path(__file__).resolve().parents[2]  # where `laglab` imports from, wherever pytest runs
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=controller
    ).stdout
    assert out.strip() == "[]"
