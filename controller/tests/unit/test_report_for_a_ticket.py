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
