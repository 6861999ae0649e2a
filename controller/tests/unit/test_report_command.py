"""`make report RUN=results/<run>`, the README's command to rebuild a report, run as the README says on
a copy of a stored run (issue #27: it crashed for every run with a NameError, because the module's
`__main__` block ran before the functions below it were defined, and no test called the command)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"


def test_make_report_rebuilds_a_stored_runs_report(tmp_path):
    run = tmp_path / "20261125T000000Z-stored"
    shutil.copytree(FIXTURES / "run", run)
    done = subprocess.run(
        ["make", "-s", "report", f"RUN={run}"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = run / "report.md"
    assert report.exists() and str(report) in done.stdout
    assert report.read_text().startswith("# "), report.read_text()[:200]


def test_make_report_says_how_to_call_it():
    done = subprocess.run(["make", "-s", "report"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "usage: make report RUN=results/<run>" in done.stdout
