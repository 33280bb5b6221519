"""The import graph of the ``kbroker`` namespace: modules, cycles and upward imports.

``python -m tests.import_graph`` prints the figures the restructuring is judged by: how many
modules there are, the import cycles (strongly connected components of more than one module,
type-only imports included: they are what hid the node-wide cycle), and imports that go up the
layers protocol -> storage -> replication -> kbroker -> spark. ``tests/test_packaging.py``
asserts there are none of either.

Modules are found by walking the five source folders as the wheel maps them (``storage/x.py``
is ``kbroker.storage.x``); an import of a package counts as an import of its ``__init__``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# folder -> (package it installs as, layer)
FOLDERS = {"protocol": ("kbroker.protocol", 0), "storage": ("kbroker.storage", 1),
           "replication": ("kbroker.replication", 2), "kbroker": ("kbroker", 3), "spark": ("kbroker.spark", 4)}
EXCLUDED = ("tests",)  # spark/tests is not installed


@dataclass
class ImportGraph:
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)

    def layer(self, module: str) -> int:
        best = ("", 3)
        for package, layer in FOLDERS.values():
            if (module == package or module.startswith(package + ".")) and len(package) > len(best[0]):
                best = (package, layer)
        return best[1]

    def upward_imports(self) -> list[tuple[str, str]]:
        return sorted((a, b) for a, targets in self.edges.items() for b in targets if self.layer(b) > self.layer(a))

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan's algorithm)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        counter = 0

        def visit(node: str) -> None:
            nonlocal counter
            index[node] = low[node] = counter
            counter += 1
            stack.append(node)
            on_stack.add(node)
            for target in self.edges.get(node, ()):
                if target not in index:
                    visit(target)
                    low[node] = min(low[node], low[target])
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
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

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(self.modules) + 100))
        for module in sorted(self.modules):
            if module not in index:
                visit(module)
        return sorted(found, key=len, reverse=True)


def _module_files() -> Iterator[tuple[str, Path]]:
    for folder, (package, _layer) in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT / folder)
            if relative.parts[0] in EXCLUDED:
                continue
            parts = [package, *relative.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _imported(module: str, path: Path, tree: ast.Module) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def build() -> ImportGraph:
    graph = ImportGraph()
    trees = {}
    for module, path in _module_files():
        graph.modules[module] = path
        trees[module] = (path, ast.parse(path.read_text()))
    for module, (path, tree) in trees.items():
        targets = {name for name in _imported(module, path, tree) if name in graph.modules and name != module}
        graph.edges[module] = targets
    return graph


def main() -> None:
    graph = build()
    cycles = graph.cycles()
    upward = graph.upward_imports()
    print(f"modules: {len(graph.modules)}")
    print(f"import edges: {sum(len(t) for t in graph.edges.values())}")
    print(f"cycles: {len(cycles)}" + "".join(f"\n  {len(c)} modules: {', '.join(c)}" for c in cycles))
    print(f"upward imports: {len(upward)}" + "".join(f"\n  {a} -> {b}" for a, b in upward))


if __name__ == "__main__":
    main()
