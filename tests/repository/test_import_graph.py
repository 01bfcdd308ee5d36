"""The package's import graph: every module imports, and no module reaches itself through imports,
lazy ones (inside functions) included, since a lazy import only hides a circle."""

import ast
import importlib
import os

import pytest

import dialoguecse_tf

PACKAGE_DIR = os.path.dirname(dialoguecse_tf.__file__)


def _modules() -> dict:
    """{dotted name: file} of every module of the package (a package is its __init__)."""
    modules = {}
    for folder, _, names in os.walk(PACKAGE_DIR):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], os.path.dirname(PACKAGE_DIR)).replace(os.sep, ".")
                modules[dotted.removesuffix(".__init__")] = path
    return modules


def import_graph(modules: dict) -> dict:
    """{module: modules its import statements name}, wherever in the file the statement is.

    `from a.b import c` names a.b.c when that is a module, else a.b. A parent package that
    Python loads first is not counted: only the statements' own targets are edges.
    """
    graph = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = sorted(target for target in targets if target in modules and target != name)
    return graph


def find_cycle(graph: dict) -> list | None:
    """One cycle [a, b, ..., a] of `graph`, or None when it has none."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in graph.get(node, ()):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_lazy_circle_and_passes_a_tree(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import f\n")
    (package / "b.py").write_text("def f():\n    from pkg import a\n")
    (package / "c.py").write_text("import pkg.b\n")
    modules = {"pkg": str(package / "__init__.py")}
    modules.update({f"pkg.{n}": str(package / f"{n}.py") for n in "abc"})
    graph = import_graph(modules)
    assert graph["pkg.b"] == ["pkg.a"] and graph["pkg.c"] == ["pkg.b"]
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    (package / "b.py").write_text("def f():\n    pass\n")
    assert find_cycle(import_graph(modules)) is None


def test_no_module_of_the_package_imports_itself_back():
    assert find_cycle(import_graph(_modules())) is None


@pytest.mark.parametrize("module", sorted(_modules()))
def test_every_module_imports(module):
    if module == "dialoguecse_tf.records.beam_pipeline":
        pytest.importorskip("apache_beam")
    importlib.import_module(module)
