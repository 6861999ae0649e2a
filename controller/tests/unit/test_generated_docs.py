"""docs/ parts generated from the code (laglab.api.generated_docs): every `laglab` command and option in
docs/cli.md, every scenario key in docs/scenarios.md. Stale when the code changed and `make docs` was
not run: this test fails and says which page."""

from pathlib import Path

import click
import pytest

from laglab.api import generated_docs
from laglab.cli import cli
from laglab.cli.usage import commands
from laglab.scenarios.schema import keys as reference
from laglab.scenarios.schema.scenario import SWEEPABLE

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("page", sorted(generated_docs.PARTS))
def test_the_generated_parts_are_what_the_code_says(page):
    text = (ROOT / page).read_text()
    assert generated_docs.rendered(page, text) == text, f"{page} is stale: run make docs"


def test_a_stale_part_is_found_and_written_again(tmp_path):
    page = "docs/scenarios.md"
    (tmp_path / "docs").mkdir()
    fresh = (ROOT / page).read_text()
    stale = fresh.replace("| `load.threads` |", "| `load.thread_count` |")
    assert stale != fresh
    (tmp_path / page).write_text(stale)
    for other in set(generated_docs.PARTS) - {page}:
        (tmp_path / other).parent.mkdir(exist_ok=True)
        (tmp_path / other).write_text((ROOT / other).read_text())
    assert generated_docs.write(tmp_path) == [page]
    assert (tmp_path / page).read_text() == fresh
    with pytest.raises(KeyError, match="no markers"):
        generated_docs.rendered(page, "# a page without them\n")


def test_every_option_has_help_and_is_in_the_reference():
    """#36.3: --duplicate, --corrupt, load start --threads/--seconds/--tables had no help; --timeout,
    lag --interval, verify --count ... were documented nowhere."""
    text = (ROOT / "docs/cli.md").read_text()
    for path, command in commands(cli):
        assert command.help, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, (path, param.name)
                assert f"`{param.opts[0]}" in text, (path, param.name)


def test_the_key_reference_has_every_key_a_sweep_or_file_may_name():
    keys = {row[0] for row in reference.rows()}
    assert set(SWEEPABLE) <= keys, set(SWEEPABLE) - keys
    for key in (
        "link.rtt",
        "load.rate",
        "search.from",
        "timeline[].at",
        "timeline[].fault.action",
        "assertions[].metric",
    ):
        assert key in keys, key
    rows = {row[0]: row for row in reference.rows()}
    assert rows["link.rtt"][1].startswith("time") and rows["link.rtt"][2] == "`0ms`" and rows["link.rtt"][3] == "yes"
    assert rows["name"][2] == "required" and "one of `native`" in rows["replicator.kind"][1]


def test_every_variable_a_user_can_set_is_in_configurations_table():
    """#36.6: PROMETHEUS_PORT, GRAFANA_PORT, the *_IMAGE variables and LAGLAB_URL were missing. Every
    variable of .env.example, of compose.yaml's `${...}` and the command's own is in the table (those
    make up writes itself are named below it)."""
    import re

    text = (ROOT / "docs/configuration.md").read_text()
    table = {name for line in text.splitlines() if line.startswith("| `")
             for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1])}  # fmt: skip
    settable = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    settable |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)", (ROOT / "compose.yaml").read_text()))
    settable |= {"LAGLAB_URL", "LAGLAB_ENV_FILE"}
    written_by_make_up = {n for n in settable if n in ("DB_IMAGE", "DB_CONFIG", "GR_CONFIG", "SOURCE_CONFIG", "TARGET_CONFIG") or n.startswith("RESOLVED_")}  # fmt: skip
    assert written_by_make_up and all(f"`{n}`" in text or n.startswith("RESOLVED_") for n in written_by_make_up)
    assert settable - written_by_make_up <= table, sorted(settable - written_by_make_up - table)


def test_every_shipped_scenario_says_what_a_user_should_see():
    """#36.6: several shipped scenarios stated no expected outcome; the ones that claim a published
    set-up named no source. The template lists every metric and every kind (it said 'profiles to come')."""
    import re

    from laglab.replicators import KINDS
    from laglab.scenarios.plan import load_file
    from laglab.scenarios.schema.fields import METRICS

    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        text = path.read_text()
        scenario = load_file(path).scenario
        if path.name == "customer-report-template.yaml":
            assert all(m in text for m in METRICS), [m for m in METRICS if m not in text]
            assert all(k in text for k in KINDS) and "to come" not in text
            continue
        assert scenario.description and scenario.expected, path.name
        if re.search(r"[Pp]ublished", text):
            sourced = scenario.reference is not None or re.search(r"^# Source.*\n(#.*\n)*?#.*https?://", text, re.M)
            assert sourced, f"{path.name} claims a published set-up and names no source"


def test_one_table_names_the_shaping_knobs():
    """#37.2: an impairment knob's field set was written out seven times. The API's body, the CLI's
    options, the parser and Impairment itself all hold exactly the knobs of KNOBS."""
    from dataclasses import fields

    from laglab.api.models import ShapingBody
    from laglab.cli.shaping import shape
    from laglab.shaping.impairment import KNOBS, Impairment
    from laglab.shaping.params import _PARSERS, parse_request

    names = [k.name for k in KNOBS]
    assert sorted(names) == sorted(f.name for f in fields(Impairment))
    assert set(names) <= set(ShapingBody.model_fields) and set(ShapingBody.model_fields) - set(names) == {
        "peer", "direction", "duration", "ports", "protocol"}  # fmt: skip
    options = {p.name for p in shape.params if isinstance(p, click.Option)}
    assert set(names) <= options
    assert set(_PARSERS) == {k.name for k in KNOBS if k.kind in ("time", "percent", "rate")}
    with pytest.raises(Exception, match="nothing to apply: give at least one of delay, jitter, loss"):
        parse_request({"peer": "mysql-target"})
