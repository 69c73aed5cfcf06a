"""The project's own modules form no import circle: each can be read, tested and changed from
the modules below it, and a maintainer never has to load the whole house to move one room.

Every import statement counts, those inside functions too (a lazy import is still an arrow);
`from pkg import name` is an arrow to `pkg.name` when that is a module, else to `pkg`; and
importing `a.b.c` runs the packages `a` and `a.b` first, so it is an arrow to each of them too
(their `__init__.py` and whatever that imports), except to the importing module's own packages,
which are loaded before it."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("torchrec_cloud", "workloads", "infra", "trainer")
# The floors, top to bottom (docs/architecture.md draws them): a module may import its own floor
# and the floors below it, never one above.
FLOORS = PACKAGES


def allowed_directions() -> set[tuple[str, str]]:
    """Every (from floor, to floor) pair an import may cross: downwards only."""
    return {(upper, lower) for i, upper in enumerate(FLOORS) for lower in FLOORS[i + 1:]}


def floor_arrows() -> set[tuple[str, str]]:
    """The (from floor, to floor) pairs the code's imports cross."""
    return {(module.split(".")[0], target.split(".")[0])
            for module, targets in import_graph().items() for target in targets
            if module.split(".")[0] != target.split(".")[0]}


@cache
def modules() -> dict[str, Path]:
    """Every module of the project's packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The project module a dotted name lives in (the longest known prefix), None if foreign."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _base(module: str, path: Path, level: int) -> str:
    """The package a relative import (`from .x import y`) starts from."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def arrows_of(module: str) -> set[str]:
    """The project modules `module` imports, at any depth."""
    known = modules()
    path = known[module]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(filter(None, (_owner(alias.name, known) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = _base(module, path, node.level)
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                child = f"{source}.{alias.name}"
                target = child if child in known else _owner(source, known)
                if target:
                    targets.add(target)
    targets |= {parent for target in targets for parent in _packages_of(target, known)
                if parent not in _packages_of(module, known)}
    targets.discard(module)
    return targets


def _packages_of(name: str, known: dict[str, Path]) -> set[str]:
    """The project packages Python runs before it runs `name`: a.b.c -> {a, a.b}."""
    parts = name.split(".")
    return {p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in known}


@cache
def import_graph() -> dict[str, frozenset[str]]:
    return {module: frozenset(arrows_of(module)) for module in modules()}


def circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_the_graph_reads_lazy_imports_and_submodules() -> None:
    """The reader itself: it sees an import inside a function, and `from pkg import module`
    as an arrow to the module (else a cycle could hide behind either)."""
    graph = import_graph()
    assert len(graph) > 100, "the project's modules were not found"
    # infra/estimate.py reads the preparation hours inside a function: still an arrow
    assert "infra.settings.prepare_rules" in graph["infra.estimate"]
    # `from workloads import identity, ...`: arrows to the modules, not to the package
    assert {"workloads.identity", "workloads.jobset"} <= graph["workloads.component"]
    assert "workloads" not in graph["workloads.component"]
    # infra/clouds.py imports each cloud's component only by name, at run time: no arrow.
    assert not any(m.startswith("infra.aws") for m in graph["infra.clouds"])


def test_importing_a_module_is_an_arrow_to_the_packages_above_it() -> None:
    """`from infra.settings.errors import X` runs infra/settings/__init__.py first: when that
    imported the loader (-> all_rules -> infra.aws.rules -> infra.settings.errors), this was a
    circle Python hid by a half-loaded package; the reader must see it."""
    graph = import_graph()
    assert {"infra.settings", "infra.settings.errors"} <= graph["infra.aws.rules"]
    assert "infra.settings" not in graph["infra.settings.loader"]  # its own package: loaded first
    known = {"a": Path("a"), "a.b": Path("a/b"), "a.b.c": Path("a/b/c.py"), "x.y": Path("x/y.py")}
    assert _packages_of("a.b.c", known) == {"a", "a.b"}


def test_circles_finds_a_circle() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}),
             "d": frozenset({"a"})}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_project_s_modules_form_no_import_circle() -> None:
    found = circles(import_graph())
    shown = "\n  ".join(" <-> ".join(circle) for circle in found)
    assert not found, ("modules that import each other (directly or round a circle); move the "
                       f"shared piece into a module below both:\n  {shown}")


def test_no_import_climbs_a_floor() -> None:
    climbing = sorted(f"{module} imports {target}" for module, targets in import_graph().items()
                      for target in targets
                      if module.split(".")[0] != target.split(".")[0]
                      and (module.split(".")[0], target.split(".")[0]) not in allowed_directions())
    assert not climbing, "imports that climb a floor:\n  " + "\n  ".join(climbing)
