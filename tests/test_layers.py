"""The import contract of the package's layers (docs/design.md, "The layers"): a module imports only
from its own layer or the layers below it, and no file imports another file's private name.
Read from the source with `ast`, so imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "xiaoyarl"

# lowest first; a module belongs to the first layer one of whose prefixes names it
LAYERS = [
    ("xiaoyarl.errors", "xiaoyarl.lazy", "xiaoyarl.machine"),
    ("xiaoyarl.core",),
    ("xiaoyarl.config", "xiaoyarl.config_io", "xiaoyarl.presets"),
    ("xiaoyarl.envs",),
    ("xiaoyarl.agents",),
    ("xiaoyarl.train",),
    ("xiaoyarl.scale",),
    ("xiaoyarl.run",),
    ("xiaoyarl.population",),
    ("xiaoyarl.tune",),
    ("xiaoyarl.finance", "xiaoyarl.stats", "xiaoyarl.policy", "xiaoyarl.export",
     "xiaoyarl.record", "xiaoyarl.support", "xiaoyarl.cli", "xiaoyarl.__main__"),
]  # fmt: skip

# Upward imports that remain, each to be removed: none left.
KNOWN_UPWARD: set[tuple[str, str, str]] = set()


def layer_of(module: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str], str]]:
    """(imported module, imported names, enclosing function or '') of every xiaoyarl import."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # for type checkers only: never imported when the code runs
            inside = child.name if isinstance(child, ast.FunctionDef) else where
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("xiaoyarl"):
                found.append((child.module, [a.name for a in child.names], where))
            elif isinstance(child, ast.Import):
                found.extend(
                    (a.name, [], where) for a in child.names if a.name.startswith("xiaoyarl")
                )
            visit(child, inside)

    visit(ast.parse(path.read_text()), "")
    return found


def all_imports() -> list[tuple[str, str, list[str], str]]:
    return [
        (module_name(path), target, names, where)
        for path in sorted(PACKAGE.rglob("*.py"))
        if module_name(path) != "xiaoyarl"  # the package's lazy names: every layer, on demand
        for target, names, where in imports(path)
    ]


def test_imports_go_down_the_layers():
    upward = set()
    for module, target, _, where in all_imports():
        if target != "xiaoyarl" and layer_of(target) > layer_of(module):
            upward.add((module, target, where))
    assert upward - KNOWN_UPWARD == set(), "imports up the layers"
    assert KNOWN_UPWARD - upward == set(), "gone: remove them from KNOWN_UPWARD"
    print(f"\n{len(upward)} upward imports left: {sorted(upward)}")


def test_no_private_name_is_imported_from_another_file():
    private = [
        f"{module} imports {name} from {target}"
        for module, target, names, _ in all_imports()
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not private


def test_no_import_circles():
    """No module reaches itself through the modules it imports (at the top or in a function)."""
    names = {module_name(path) for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for module, target, imported, _ in all_imports():
        candidates = [f"{target}.{name}" for name in imported] + [target]
        graph[module] |= {c for c in candidates if c in names and c != module}
    circles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_no_test_file_imports_another():
    """Shared test helpers are fixtures in conftest.py: no file of tests/ imports a module of
    tests/ (the env modules there are loaded by `module:Id` env ids, never imported)."""
    tests = Path(__file__).resolve().parent
    local = {path.stem for path in tests.glob("*.py")}
    found = []
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] in local]  # fmt: skip
    assert not found, found


def test_no_algorithm_is_named_outside_the_agents():
    """What an algorithm supports is declared by its agent class (`AgentBase.takes_h_term`,
    `tune_space`, `member_fields`, `check`, ...), not listed by name in the layers that use it:
    outside `agents/`, no registered algorithm's name is compared with, listed in a container
    literal or used as a key; the preset files' index (`configs/presets.yaml`) names pairs. A
    name as a plain value (Config's default algorithm, a docstring) is neither."""
    from xiaoyarl.agents import ALGORITHMS

    names = set(ALGORITHMS)

    def named(node: ast.AST) -> list[str]:
        return [
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
        ]

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "agents" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                hits = named(node)
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
                hits = named(node)
            elif isinstance(node, (ast.Subscript, ast.match_case)):
                hits = named(node.slice if isinstance(node, ast.Subscript) else node.pattern)
            else:
                continue
            line = getattr(node, "lineno", "?")
            found += [f"{path.relative_to(PACKAGE)}:{line} {hit!r}" for hit in hits]
    assert not found, "algorithm names outside agents/: " + ", ".join(sorted(set(found)))
