"""Claims the Layout section (docs/architecture.md) makes about the code, checked (issue #22)."""

import re
from pathlib import Path

LAGLAB = Path(__file__).resolve().parents[2] / "laglab"


def test_only_the_accessor_module_reads_the_apps_extensions():
    """`Lab` was a service locator looked up 24 times through current_app.extensions["laglab"]."""
    readers = [
        str(path.relative_to(LAGLAB)) for path in LAGLAB.rglob("*.py") if re.search(r"extensions\[", path.read_text())
    ]
    assert sorted(readers) == ["api/parts.py", "app.py"]  # app.py stores it; parts.py alone reads it
    assert "extensions[parts.KEY] = lab" in (LAGLAB / "app.py").read_text()


def test_the_tree_in_the_architecture_page_is_the_packages_tree():
    """#52.4: docs/architecture.md's tree names every folder of the package and of scenarios/, and every
    module at the package root, and nothing that is not there; at most 8 modules at the root."""
    page = (LAGLAB.parents[1] / "docs" / "architecture.md").read_text()
    block = page.split("## The tree", 1)[1].split("```", 2)[1]
    listed = set(re.findall(r"(?<![\w./])([a-z_]+/|[a-z_]+\.py)(?=\s)", block))
    folders = {f"{p.name}/" for p in LAGLAB.iterdir() if p.is_dir() and p.name != "__pycache__"}
    folders |= {f"{p.name}/" for p in (LAGLAB / "scenarios").iterdir() if p.is_dir() and p.name != "__pycache__"}
    root = {p.name for p in LAGLAB.glob("*.py") if p.name != "__init__.py"}
    scenario_modules = {p.name for p in (LAGLAB / "scenarios").glob("*.py") if p.name != "__init__.py"}
    assert listed - {"laglab/"} == folders | root | scenario_modules
    assert len(root) <= 8, sorted(root)
