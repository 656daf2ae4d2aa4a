"""The hello world (`examples/hello_world.py`, docs/hello-world.md) solves CartPole-v1 on the
library's core path, and what it loads of xiaoyarl stays under 1,000 lines of code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "hello_world.py"

# Runs the example as `python examples/hello_world.py` would, then prints the xiaoyarl modules
# the process holds (name -> file) as the last line.
PROBE = """
import json, runpy, sys
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps({name: getattr(module, "__file__", None) for name, module in sys.modules.items()
                  if name == "xiaoyarl" or name.startswith("xiaoyarl.")}))
"""


@pytest.mark.learning
@pytest.mark.timeout(600)
def test_hello_world_solves_cartpole_loading_under_1000_lines(code_lines):
    run = subprocess.run([sys.executable, "-c", PROBE, str(EXAMPLE)], capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    *output, last = run.stdout.strip().splitlines()
    assert any(line.startswith("solved: mean return") for line in output), run.stdout
    modules = json.loads(last)
    lines = {name: code_lines(path) for name, path in modules.items() if path}
    total = sum(lines.values())
    print(f"\nhello world: {len(lines)} xiaoyarl modules, {total} lines of code")
    for name, count in sorted(lines.items(), key=lambda item: -item[1]):
        print(f"  {count:4d}  {name}")
    assert total <= 1000
    # the core path only: no trainer, runner, other agents, registry or applications
    assert not {
        n
        for n in modules
        if n.startswith(
            ("xiaoyarl.train", "xiaoyarl.scale", "xiaoyarl.population", "xiaoyarl.finance")
        )
    }
    assert {n for n in modules if n.startswith("xiaoyarl.agents.")} == {
        "xiaoyarl.agents.base", "xiaoyarl.agents.ppo"}  # fmt: skip
