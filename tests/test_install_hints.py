"""Every install hint, in the package and in the docs, has the one form that works for a user
who cloned the repository (`pip install -e '.[extra]'`, quoted for zsh) and names an extra
that pyproject.toml defines."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HINT = re.compile(r"pip install -e '\.\[([a-z0-9_-]+|\{\w+\})\]'")


def _extras() -> set[str]:
    """The extras pyproject.toml defines (no tomllib: Python 3.10 is supported)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([a-z0-9_-]+)\s*=", section, flags=re.M))


def _files():
    yield ROOT / "README.md"
    for folder in ("xiaoyarl", "docs", "benchmarks", "examples"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".md") and path.is_file():
                yield path


def test_install_hints_have_one_form_and_name_real_extras():
    extras = _extras()
    assert {"box2d", "mujoco", "finance", "finance-sample", "multi"} <= extras
    bad = []
    for path in _files():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            where = f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            # an extra named any other way: .[x] unquoted, "xiaoyarl[x]", ".[x]" alone
            for match in re.finditer(r"(?:xiaoyarl|\.)\[[a-z0-9_{}-]+\]", line):
                start = match.start()
                if line[max(0, start - 16) : start] != "pip install -e '":
                    bad.append(f"{where}  <- {match.group()}")
            for match in HINT.finditer(line):
                name = match.group(1)
                if not name.startswith("{") and name not in extras:
                    bad.append(f"{where}  <- no extra '{name}' in pyproject.toml")
    assert not bad, "\n".join(bad)


def test_runtime_install_messages_use_the_same_form():
    from xiaoyarl.finance.data import INSTALL_FINANCE

    assert "pip install -e '.[finance]'" in INSTALL_FINANCE
