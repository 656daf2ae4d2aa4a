"""The benchmark scripts run (on a tiny budget) and measure: every number they write is finite
and their measurements are positive. How fast is not checked here (BENCHMARKS.md says it)."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
pytestmark = [pytest.mark.bench, pytest.mark.timeout(600)]
NEEDS_MPE2 = pytest.mark.skipif(
    importlib.util.find_spec("mpe2") is None, reason="mpe2 (the 'multi' extra) is not installed"
)


def measured(data) -> list[float]:
    """Every number of a benchmark's JSON output but the machine's description (its core count,
    memory, versions) and the settings it echoes."""
    if isinstance(data, dict):
        return [x for key, value in data.items() if key not in ("machine", "config", "args")
                for x in measured(value)]  # fmt: skip
    if isinstance(data, list):
        return [x for value in data for x in measured(value)]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        return []
    return [float(data)]


def assert_measures(path: Path) -> None:
    numbers = measured(json.loads(path.read_text()))
    assert numbers, f"{path.name} holds no measurement"
    assert all(math.isfinite(x) for x in numbers), numbers
    assert any(x > 0 for x in numbers), numbers


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("env_throughput.py", "--envs CartPole-v1 --seconds 0.05", "CartPole-v1"),
        ("buffer_sampling.py", "--capacity 4096 --seconds 0.05", "prioritized"),
        ("sac_update.py", "--steps 2 --repeats 1", "| xiaoyarl |"),
        (
            "ppo_backends.py",
            "--seeds 0 --max-steps 2048 --throughput-steps 2048",
            "| torch-native, 1024 envs |",
        ),
        (
            "parallel_runner.py",
            "--env CartPole-v1 --steps 4096 --repeats 1 --num-envs 8",
            "| parallel, 2 worker(s) |",
        ),
        (
            "compare.py",
            "--tasks sac-pendulum --seeds 0 --budget 300 --throughput-seconds 0.05",
            "| sac Pendulum-v1 (gymnasium), target -200 | Stable-Baselines3 |",
        ),
        (
            "compare.py",
            "--tasks sac-pendulum --seeds 0 --budget 300 --throughput-seconds 0.05 --defaults",
            "xiaoyarl with its defaults",
        ),
        (
            "training_throughput.py",
            "--device cpu --threads 1 --rows ppo:CartPole-v1:64 sac:Pendulum-v1:4 --rollouts 2",
            "| sac | Pendulum-v1 | 4 |",
        ),
        ("trading.py", "--quick", "| random walk |"),
        ("memory.py", "--seeds 0 --max-steps 1024", "| gru | 0/1 |"),
        ("action_kinds.py", "--seeds 0 --scale 0.01", "| DQN blind to the masks |"),
        ("minatar_throughput.py", "--games Breakout --seconds 0.05", "| package x16 observed: "),
        (
            "learning.py",
            "--algos dqn sac --seeds 0 --max-steps 300 --set learning_starts=100",
            "| sac | Pendulum-v1 |",
        ),
        # multi-agent
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
    ],  # fmt: skip
)
def test_benchmark_script_runs(tmp_path, script, args, expect):
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--json", str(tmp_path / "out.json"), *args.split()],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert expect in done.stdout
    assert_measures(tmp_path / "out.json")


def test_stability_study_runs_and_resumes(tmp_path):
    """Two runs, their table and plot; a second invocation finds them done and trains nothing."""
    out = tmp_path / "study"
    command = [sys.executable, str(BENCH / "stability.py"), "--tasks", "sac-pendulum", "--seeds",
               "0", "--variants", "xiaoyarl", "sb3", "--budget", "300", "--out", str(out),
               "--json", str(tmp_path / "out.json")]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "sac-pendulum   sb3" in first.stdout
    assert "| sac Pendulum-v1, 30,000 steps, target -200 | xiaoyarl | 1 |" in first.stdout
    assert (out / "sac-pendulum.png").stat().st_size > 0
    assert len(list(out.glob("sac-pendulum__*.json"))) == 2
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "seed 0: final" not in again.stdout  # nothing trained again
    assert "| sac Pendulum-v1, 30,000 steps, target -200 | sb3 | 1 |" in again.stdout


def test_ensemble_study_runs_and_reuses_its_runs(tmp_path):
    """Three tiny runs scored alone, in 3-ensembles, all together and fused; a second invocation
    reuses the runs' final policies."""
    command = [sys.executable, str(BENCH / "ensembles.py"), "--tasks", "ppo-pendulum", "--seeds",
               "0", "1", "2", "--budget", "2048", "--runs", str(tmp_path / "runs"),
               "--out", str(tmp_path / "out.json")]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("ppo-pendulum seed") == 3
    for row in ("| single runs (3) |", "| 3-ensembles (3) |", "| ensemble of all 3 |",
                "| fusion of all 3 |"):  # fmt: skip
        assert row in first.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ppo-pendulum seed" not in again.stdout  # nothing trained again
    assert again.stdout.split("\n\n")[-1] == first.stdout.split("\n\n")[-1]  # the same scores


def test_regression_harness_records_and_finds_a_run_identical(tmp_path):
    """The same fixed-seed run twice gives the same recorder to the digit; a changed cell is
    reported by name."""
    out = tmp_path / "baseline.json"
    script = [sys.executable, str(BENCH / "regression.py")]
    recorded = subprocess.run([*script, "record", "--runs", "ppo-cartpole", "--out", str(out)],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    again = subprocess.run([*script, "compare", "--runs", "ppo-cartpole", "--baseline", str(out)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0 and "1 of 1 runs identical" in again.stdout, again.stdout
    changed = out.read_text().replace('"eval_mean": "', '"eval_mean": "1', 1)
    out.write_text(changed)
    differ = subprocess.run([*script, "compare", "--runs", "ppo-cartpole", "--baseline", str(out)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert differ.returncode == 1 and "row 1 eval_mean" in differ.stdout, differ.stdout


def test_compare_evaluates_both_libraries_at_the_same_fine_cadence(tmp_path):
    """compare.py's CartPole rows: both libraries evaluate every 2,500 env steps (SB3 at each
    multiple, xiaoyarl at the end of the rollout that crosses it), so that neither time to
    target includes training on to a coarse next evaluation (with the earlier 10,000, a
    6,000-step budget was evaluated once, at its end)."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "compare.py"), "--tasks", "pqn-cartpole-torch", "--seeds",
         "0", "--budget", "6000", "--threads", "1", "--throughput-seconds", "0.05", "--json",
         str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads((tmp_path / "out.json").read_text())["results"]["pqn-cartpole-torch"]
    xiaoyarl, sb3 = runs["xiaoyarl"][0], runs["sb3"][0]
    rollout = 16 * 64  # the CartPole preset's sub-envs x steps
    for run, late in ((sb3, 0), (xiaoyarl, rollout - 1)):
        steps = [step for step, _ in run["curve"]]
        before_end = [s for s in steps if s < run["total_steps"]]
        assert before_end and before_end[0] <= 2_500 + late, steps
        assert all(s % 2_500 <= late for s in before_end), steps
        assert len(before_end) >= 2 or run["solved"], steps
