"""report.md and report.html as a ticket takes them (#36.5): the link's ends named, each bound explained,
one file with its plots inside, and a scenario's text (hostile: anyone who can post a run writes it)
shown as text, never run, in the page the controller serves."""

import json
import shutil
from pathlib import Path

from laglab.scenarios.report import markdown as report

from ..conftest import authorized

FIXTURES = Path(__file__).parent / "fixtures"
HOSTILE = "<script>alert(1)</script> [click](javascript:alert(2)) <img src=x onerror=alert(3)>"


def rendered(tmp_path) -> Path:
    run = tmp_path / "20261127T000000Z-ticket"
    shutil.copytree(FIXTURES / "run", run)
    scenario = {"name": "ticket", "description": HOSTILE, "expected": "lag grows",
                "link": {"between": ["mysql-source", "mysql-target"], "rtt": "180ms", "rate": "2mbit"},
                "load": {"tool": "sysbench", "threads": 8, "rate": 150}}  # fmt: skip
    (run / "scenario.json").write_text(json.dumps({"plan": {"scenario": scenario}}))
    report.render(run)
    return run


def test_the_report_names_the_links_ends_and_explains_each_bound(tmp_path):
    text = (rendered(tmp_path) / "report.md").read_text()
    assert "link Mbit/s (mysql-source→mysql-target / back)" in text and "a→b" not in text
    assert "**Expected:** lag grows" in text
    bounds = [
        line.split("|")[3].strip() for line in text.splitlines() if line.startswith("| ") and "replication |" in line
    ]
    assert bounds, "the fixture's points have a bound"
    legend = next(line for line in text.splitlines() if line.startswith("Bounds: "))
    for bound in set(bounds) - {"-"}:
        assert f"**{bound}**: " in legend, (bound, legend)


def test_report_html_is_one_file_with_its_plots_and_the_scenarios_text_as_text(tmp_path):
    run = rendered(tmp_path)
    page = (run / "report.html").read_text()
    plots = sorted(p.name for p in run.glob("*.png"))
    assert plots, "the fixture makes plots"
    assert page.count('src="data:image/png;base64,') == len(plots)
    assert not any(f'src="{name}"' in page for name in plots)
    assert "<table>" in page and "<h1>" in page
    assert "<script" not in page and "onerror=" not in page.replace("onerror=alert(3)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'href="javascript:' not in page


def test_results_are_served_sandboxed(tmp_path):
    """Even a page that slipped past the escaping runs no script and reaches none of the dashboard's
    storage (the token): the Content-Security-Policy's sandbox gives it an origin of its own."""
    from ..conftest import TOKEN
    from .fakes import fake_app

    results = tmp_path / "results"
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": TOKEN})
    (results / "r1").mkdir(parents=True)
    (results / "r1" / "report.html").write_text("<script>alert(1)</script>")
    answer = authorized(app).get("/results/r1/report.html")
    assert answer.status_code == 200
    policy = answer.headers["Content-Security-Policy"]
    assert policy.startswith("sandbox;") and "default-src 'none'" in policy and "script-src" not in policy
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.get_data() == b"<script>alert(1)</script>"
    answer.close()


def test_the_first_screen_says_what_would_keep_up_and_how_far_behind_after_the_onset():
    """#53: "lag grew 0.118 s per second" had no time scale, and nothing said what would keep up. The
    figures are this lab's measured 200 TPS point at 2 Mbit/s and 250 ms (test_bottleneck.py): the
    model says the link binds; the remedy is the link the binlog needs, not a guess."""
    from laglab.scenarios.analysis.bottleneck import explain
    from laglab.scenarios.report import verdict

    from .test_bottleneck import replication_point

    points = [replication_point(1, 0.719, 0.7735, 0.0), replication_point(2, 1.43, 1.5576, -0.002),
              replication_point(3, 2.696, 2.0347, 0.348, ci={"slope": 0.348, "low": 0.33, "high": 0.36},
                                max_lag_seconds=9.1)]  # fmt: skip
    bounds = explain({"points": points})
    kept = verdict.remedies(bounds)
    assert kept[0] == (
        "point 1: it keeps up here: the binlog needs 0.779 Mbit/s on the wire of this link's 1.93 "
        "(40 %); about 2.5x these writes would fill it"
    )  # 0.719 x 1.083
    assert kept[2:] == [
        "point 3: a link with at least 3.21 Mbit/s of goodput (the binlog needs 2.92 Mbit/s on the wire; this link "
        "measured 1.93), or fewer bytes: compression (`replicator: {compression: zstd}`)"
    ]
    assert verdict._lag_words(points[2], 600.0) == (
        "lag grew 0.348 s per second (about 20.9 s behind per minute, 209 s after 10 min), at most 9.10 s"
    )
    # Grew or not is the fit's interval, not a fixed 0.01: a slope of 0.008 whose interval is above 0 grew.
    slow = {"lag_slope": 0.008, "lag_slope_ci": {"low": 0.005, "high": 0.011}, "max_lag_seconds": 1.0}
    assert verdict._lag_words(slow).startswith("lag grew 0.008 s per second")
    flat = {"lag_slope": 0.008, "lag_slope_ci": {"low": -0.002, "high": 0.018}, "max_lag_seconds": 1.0}
    assert verdict._lag_words(flat) == "lag held steady, at most 1.00 s"


def test_a_quick_run_on_a_stand_in_says_so_before_anything_else(tmp_path):
    """#53: a 20-second quick run said nothing about a 10-minute onset, and the 9.7 stand-in was hidden."""
    run = tmp_path / "20261127T000000Z-ticket"
    shutil.copytree(FIXTURES / "run", run)
    scenario = {"name": "ticket", "description": "lag grows after 10 minutes", "onset": 600.0,
                "link": {"between": ["mysql-source", "mysql-target"], "rtt": "180ms", "rate": "2Mbps"},
                "load": {"tool": "sysbench", "script": "oltp_write_only", "threads": 8, "rate": 150, "duration": 20.0}}  # fmt: skip
    (run / "scenario.json").write_text(json.dumps({"plan": {"scenario": scenario}}))
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "quick": True}))
    environment = json.loads((run / "environment.json").read_text())
    environment["servers_instead"] = [{"service": "mysql-source", "asked": "mysql:8.0.32", "ran": "9.7.4-2",
                                       "image": "laglab/mysql:9.7-debian", "stand_in": True}]  # fmt: skip
    (run / "environment.json").write_text(json.dumps(environment))
    first = "\n".join((report.render(run)).read_text().splitlines()[:25])
    assert "A quick run (20 s of load per point)" in first
    assert "starts after 10 min; this run's load stopped after 20 s, so it cannot show it" in first
    assert "mysql-source ran 9.7.4-2 (Debian's stand-in laglab/mysql:9.7-debian) in place of mysql:8.0.32" in first
    assert "\n![lag.png](lag.png)\n" in first and "RTT 180 ms, rate 2 Mbit/s" in first
