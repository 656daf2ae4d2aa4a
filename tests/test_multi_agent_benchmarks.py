"""The multi-agent benchmark scripts run (on a tiny budget); their numbers are not checked."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
NEEDS_MPE2 = pytest.mark.skipif(
    importlib.util.find_spec("mpe2") is None, reason="mpe2 (the 'multi' extra) is not installed"
)


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("multi_agent_baselines.py", "--episodes 20", "| SpreadContinuous-v0 |"),
        (
            "multi_agent_baselines.py",
            "--episodes 4 --envs mpe2:simple_spread_v3+continuous",
            "| mpe2:simple_spread_v3+continuous |",
        ),
        ("multi_agent_throughput.py", "--quick", "| xiaoyarl SpreadDiscrete-v0 | cpu | 256 |"),
        (
            "multi_agent_learning.py",
            "--runs vdn:SpreadDiscrete-v0 --seeds 0 --max-steps 2000 --episodes 20",
            "| vdn | SpreadDiscrete-v0 |",
        ),
        pytest.param(
            "multi_agent_learning.py",
            "--runs maddpg:mpe2:simple_spread_v3+continuous --seeds 0 --max-steps 1000 "
            "--episodes 4",
            "| maddpg | mpe2:simple_spread_v3+continuous |",
            marks=NEEDS_MPE2,
        ),
    ],
)
def test_multi_agent_benchmark_runs(tmp_path, script, args, expect):
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--json", str(tmp_path / "out.json"), *args.split()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expect in done.stdout
    assert (tmp_path / "out.json").stat().st_size > 0
