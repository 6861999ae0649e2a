"""The codebase's shape, measured from its own imports (every import statement: module level, inside
functions, under TYPE_CHECKING), so that it cannot drift back (#37): no import cycle, nothing but the
entry point imports laglab.app, no class over 20 methods, a shaping knob named only in its table and
the backends that implement it, no deadline loop written by hand (deadline.poll is the one way)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "laglab"


def modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The laglab modules `name` imports (a package's `from . import x` names the module x)."""
    package = name if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists() else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("laglab")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("laglab"):
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    trees = modules()
    return {name: imports(name, tree, set(trees)) for name, tree in trees.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_and_only_the_entry_point_imports_the_app():
    edges = graph()
    assert cycles(edges) == []
    importers = sorted(m for m, targets in edges.items() if "laglab.app" in targets)
    assert importers == ["laglab.__main__"], importers


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_class_has_more_than_20_methods():
    big = []
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > 20:
                    big.append((f"{name}.{node.name}", len(methods)))
    assert big == []


def test_a_shaping_knob_is_named_in_its_table_and_the_backends_that_do_it():
    named = sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        for p in PACKAGE.rglob("*.py")
        if re.search(r"\bcorrupt\b", p.read_text())
    )
    assert named == ["laglab.shaping.chaos_mesh", "laglab.shaping.impairment", "laglab.shaping.kernel",
                     "laglab.shaping.nfqueue"]  # fmt: skip


def test_no_deadline_loop_is_written_by_hand():
    """`while time.monotonic() < deadline`, `if time.monotonic() > deadline: raise` inside a loop, and
    their kin: deadline.poll is the one way to wait."""
    loops = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "deadline.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"while .*(monotonic\(\)|deadline)|monotonic\(\) *>=? *deadline", line):
                loops.append(f"{path.name}:{number}")
    assert loops == []


def test_a_point_flows_downhill():
    """#37.3: once `plan.Point.plan()` resolved a point, nothing downstream reads the scenario again:
    no `.scenario` in the runner's point, the replicators, the buffers or the summary (the runner's
    progress line and the run's name read the Plan's, which is the run's, not the point's)."""
    downstream = ["replicators", "scenarios.run", "scenarios.analysis.summarise"]
    found = []
    for name, tree in modules().items():
        if not any(name == f"laglab.{d}" or name.startswith(f"laglab.{d}.") for d in downstream):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "scenario":
                owner = ast.unparse(node.value)
                if owner not in ("plan", "self.plan"):  # the run's Plan: its name, timeline's presence
                    found.append(f"{name}:{node.lineno} {owner}.scenario")
    assert found == []
