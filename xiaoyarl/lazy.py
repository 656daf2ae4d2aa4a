"""Package names that load on first use (PEP 562): one mechanism for every package `__init__`,
so that importing one module loads only what it uses.

A package names its public names once, in its type stub `__init__.pyi` beside `__init__.py`:
`from module import name` lines (what type checkers read) and `__all__`. `attach` reads the
stub's imports (the layout of Scientific Python's SPEC 1 on lazy loading) and gives the package
its `__getattr__`, `__dir__` and `__all__`: each name is imported from its module on first
access, then kept in the package's namespace. Not `lazy_loader` itself: a dependency for these
twenty lines.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from importlib.util import resolve_name
from pathlib import Path
from typing import Any


def attach(
    namespace: dict[str, Any], computed: Mapping[str, Callable[[], Any]] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` of the package whose globals are `namespace`: the
    names its stub imports, and those of `computed`, whose values the functions given return."""
    package = namespace["__name__"]
    stub = ast.parse(Path(namespace["__file__"]).with_suffix(".pyi").read_text())
    sources: dict[str, Any] = {
        alias.asname or alias.name: (resolve_name("." * node.level + (node.module or ""), package),
                                     alias.name)
        for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }  # fmt: skip
    sources.update(computed or {})

    def __getattr__(name: str) -> Any:
        if name not in sources:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        source = sources[name]
        value = source() if callable(source) else getattr(importlib.import_module(source[0]),
                                                           source[1])  # fmt: skip
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__, sorted(sources)
