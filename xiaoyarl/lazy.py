"""Package names that load on first use (PEP 562): one mechanism for every package `__init__`,
so that importing one module loads only what it uses."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    namespace: dict[str, Any], sources: Mapping[str, str | Callable[[], Any]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for the package whose globals are `namespace`: each public name
    of `sources` comes from the module named there (the attribute of the same name) or from the
    function given, on first access, and is then kept in `namespace`."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = source() if callable(source) else getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
