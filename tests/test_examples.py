"""Every example runs end to end (on a tiny budget) and the benchmark scripts start."""

import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the hello world writes no run folder; tests/test_hello_world.py runs it to the end
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "hello_world.py")


@pytest.mark.docs
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, tmp_path):
    result = subprocess.run(
        [sys.executable, str(path), "--max-steps", "4096", "--cwd", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "run" / "actor.pt").is_file()
    # it trained its whole budget, evaluating on the way, and reports a finite return at the end
    with open(tmp_path / "run" / "recorder.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and int(rows[-1]["step"]) >= 4096, rows[-1:]
    assert all(math.isfinite(float(row["eval_mean"])) for row in rows)
    last = result.stdout.strip().splitlines()[-1]
    reported = re.findall(r"-?\d+\.\d+", last)
    assert reported and all(math.isfinite(float(x)) for x in reported), last


@pytest.mark.bench
def test_ppo_backends_benchmark_runs_on_a_tiny_budget(tmp_path):
    out = tmp_path / "r.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ppo_backends.py"), "--seeds", "0",
         "--max-steps", "4096", "--throughput-steps", "4096", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| torch-native, 1024 envs |" in result.stdout and out.is_file()
