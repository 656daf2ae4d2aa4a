"""Learning tests: each algorithm reaches its env's target return, through the CLI.

The multi-seed runs are marked `slow` (`make test-slow`); one quick PPO run stays in the
default suite as a guard against silent learning regressions.
"""

import json

import pytest
from helpers import cli


def train(tmp_path, algo, env, seed, *extra, max_steps=3_000_000):
    summary_path = tmp_path / f"{algo}_{env}_{seed}.json"
    result = cli(
        "train", algo, env, "--seed", str(seed), "--threads", "1", "--quiet",
        "--max-steps", str(max_steps), "--cwd", str(tmp_path / f"run_{algo}_{env}_{seed}"),
        "--summary-json", str(summary_path), *extra, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(summary_path.read_text())


def test_ppo_solves_torch_cartpole_quick(tmp_path):
    summary = train(tmp_path, "ppo", "CartPole-v1", 0, max_steps=2_000_000)
    assert summary["solved"] and summary["final_eval_mean"] >= 475


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "env", "extra", "target"),
    [
        ("ppo", "CartPole-v1", (), 475),
        ("ppo", "Pendulum-v1", (), -200),
        ("ppo", "CartPole-v1", ("--backend", "gymnasium"), 475),
        ("a2c", "CartPole-v1", (), 475),
    ],
    ids=["ppo-torch-cartpole", "ppo-torch-pendulum", "ppo-gym-cartpole", "a2c-torch-cartpole"],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solves_on_every_seed(tmp_path, algo, env, extra, target, seed):
    summary = train(tmp_path, algo, env, seed, *extra, max_steps=8_000_000)
    assert summary["solved"], summary
    assert summary["final_eval_mean"] >= target
