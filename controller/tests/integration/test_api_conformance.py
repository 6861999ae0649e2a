"""The controller against its own OpenAPI document: schemathesis generates requests from the document
the running controller serves, for every operation (those that act on containers or start long work
narrowed by fuzz_hooks.py: faults act on the `fuzz-target` container only, captures on its link to loadgen), runs every check (server
errors, status codes, response schemas and content types, schema-valid requests accepted,
schema-invalid ones rejected, 405s with Allow, use after free, ...) and the test fails on any finding."""

import os
import subprocess
import sys
from pathlib import Path

from .conftest import wait_until

HERE = Path(__file__).resolve().parent


def test_the_api_conforms_to_its_own_document(api, compose, tmp_path):
    compose("--profile", "fuzz", "up", "-d", "--wait", "fuzz-target", timeout=120)
    argv = [
        str(Path(sys.executable).with_name("schemathesis")), "--config-file", str(HERE / "schemathesis.toml"),
        "run", f"{api.base}/api/openapi.json", "--checks", "all", "--max-examples", "50", "--seed", "1",
        "--generation-database", "none", "--request-timeout", "60", "--max-response-time", "30", "--no-color",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]  # fmt: skip
    if api.token:
        argv += ["--header", f"Authorization: Bearer {api.token}"]
    try:
        env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HERE / "fuzz_hooks.py")}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=env)
    finally:  # whatever the generated requests changed in the lab goes back
        # Runs first, and their cleanup waited for: an interrupted run's cleanup (shaping cleared, load
        # stopped) goes on in its thread after the DELETE answered, and would undo what comes after it.
        for run in api.get("/api/runs").json()["runs"]:
            if run["status"] in ("pending", "running"):
                api.delete(f"/api/runs/{run['id']}", timeout=60)
        wait_until(
            lambda: all(r["step"] == "done" for r in api.get("/api/runs").json()["runs"] if r["status"] != "pending"),
            300, 0.5, "every run's cleanup",
        )  # fmt: skip
        api.delete("/api/shaping", timeout=60)
        api.delete("/api/partitions", timeout=60)
        api.delete("/api/load", timeout=60)
        for capture in api.get("/api/captures").json()["captures"]:  # a fuzzed time the hook did not shorten
            if capture["status"] == "running":
                api.delete(f"/api/captures/{capture['id']}", timeout=60)
        compose("--profile", "fuzz", "rm", "-s", "-f", "fuzz-target", timeout=120)
    summary = done.stdout[done.stdout.find("= SUMMARY =") :]
    assert "Tested: 40" in summary, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
