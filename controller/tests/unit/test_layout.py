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
