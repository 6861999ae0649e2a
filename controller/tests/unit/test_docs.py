"""The README is short and the rest is in docs/ without losing anything on the way: every variable of
.env.example and every operation of the API is documented, every relative link resolves (anchors
included), every page starts with what a reader comes to it for."""

import re
from pathlib import Path

import pytest

from laglab.api.openapi import document

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def docs_text() -> str:
    return "\n".join(p.read_text() for p in PAGES)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_read_in_five_minutes():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 200, len(lines)


def test_every_variable_of_env_example_is_documented():
    names = set(re.findall(r"(?m)^#?\s?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text()))
    assert len(names) > 30
    text = docs_text()
    assert sorted(n for n in names if f"`{n}`" not in text) == []


def test_every_operation_of_the_api_is_documented(app):
    with app.app_context():
        paths = document()["paths"]
    operations = [f"`{method.upper()} {path}`" for path, ops in paths.items() for method in ops]
    assert len(operations) > 30
    api = (ROOT / "docs/api.md").read_text()
    assert [op for op in operations if op not in api] == []


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"(?m)^#+ (.+)$", file.read_text())
            assert anchor in {slug(h) for h in headings}, f"{page.name}: no heading #{anchor} in {file.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_starts_with_what_it_is_for(page):
    title, blank, purpose = page.read_text().splitlines()[:3]
    assert title.startswith("# ") and blank == ""
    assert purpose.startswith("*Read this for: "), purpose


def test_the_readme_points_to_every_page():
    readme = (ROOT / "README.md").read_text()
    assert [p.name for p in PAGES if f"](docs/{p.name})" not in readme] == []


def test_a_bare_make_lists_the_targets_and_the_readme_says_what_make_test_costs():
    """#36.7: a bare `make` ran `make up`; there was no `make help`; the README called `make test` one of
    the two commands without its half hour."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    listed = subprocess.run(["make", "-s", "-C", str(root)], capture_output=True, text=True, timeout=30).stdout
    for target in ("up", "down", "test", "help", "run", "report"):
        assert any(line.split()[0] == target for line in listed.splitlines() if line.strip()), target
    readme = (root / "README.md").read_text()
    assert "make help" in readme and re.search(r"`make test` takes about \d+ minutes", readme)  # docs/testing.md's CI
