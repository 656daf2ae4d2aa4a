"""Learning tests: each algorithm reaches its env's target return, through the CLI.

All of them are the full tier's (marker `learning`, `make test-full`): a few quick runs (PPO,
DDPG and PQN in seconds) and every algorithm on several seeds (minutes each).
"""

import json

import pytest

pytestmark = [pytest.mark.learning, pytest.mark.timeout(1800)]


def train(cli, tmp_path, algo, env, seed, *extra, max_steps=3_000_000):
    summary_path = tmp_path / f"{algo}_{env}_{seed}.json"
    result = cli(
        "train", algo, env, "--seed", str(seed), "--threads", "1", "--quiet",
        "--max-steps", str(max_steps), "--cwd", str(tmp_path / f"run_{algo}_{env}_{seed}"),
        "--summary-json", str(summary_path), *extra, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(summary_path.read_text())


def test_ppo_solves_torch_cartpole_quick(cli, tmp_path):
    summary = train(cli, tmp_path, "ppo", "CartPole-v1", 0, max_steps=2_000_000)
    assert summary["solved"] and summary["final_eval_mean"] >= 475


def test_ddpg_solves_torch_pendulum_quick(cli, tmp_path):
    """Off-policy learning end to end (replay, targets, exploration noise) with the defaults
    but smaller networks, so that it takes seconds rather than minutes."""
    summary = train(cli, tmp_path, "ddpg", "Pendulum-v1", 0, "--set", "net_dims=[64,64]", "--set",
                    "batch_size=128", "--eval-every", "1000", max_steps=12_000)  # fmt: skip
    assert summary["solved"] and summary["final_eval_mean"] >= -200


def test_pqn_solves_torch_cartpole_quick(cli, tmp_path):
    """Value learning without replay or target network, end to end, in seconds."""
    summary = train(cli, tmp_path, "pqn", "CartPole-v1", 0, max_steps=500_000)
    assert summary["solved"] and summary["final_eval_mean"] >= 475


GYM = ("--backend", "gymnasium")
CASES = {  # id: (algo, env, extra args, target, env-step budget)
    "ppo-torch-cartpole": ("ppo", "CartPole-v1", (), 475, 8_000_000),
    "ppo-torch-pendulum": ("ppo", "Pendulum-v1", (), -200, 8_000_000),
    "ppo-gym-cartpole": ("ppo", "CartPole-v1", GYM, 475, 8_000_000),
    "a2c-torch-cartpole": ("a2c", "CartPole-v1", (), 475, 8_000_000),
    "pqn-torch-cartpole": ("pqn", "CartPole-v1", (), 475, 500_000),
    "pqn-gym-cartpole": ("pqn", "CartPole-v1", GYM, 475, 500_000),
    "pqn-torch-acrobot": ("pqn", "Acrobot-v1", (), -100, 1_000_000),
    "fast_td3-torch-pendulum": ("fast_td3", "Pendulum-v1", (), -200, 500_000),
    "fast_sac-torch-pendulum": ("fast_sac", "Pendulum-v1", (), -200, 500_000),
    "ppo-torch-chase": ("ppo", "Chase-v0", (), 6.3, 3_000_000),
    # SAC with gSDE and a fixed temperature (the task preset): found the flag on seeds 0-3
    "sac-torch-mountaincarcontinuous": ("sac", "MountainCarContinuous-v0", (), 90, 200_000),
    # cooperative navigation (its task preset): half way from the random policy to the heuristic
    "pqn_vdn-torch-spread": ("pqn_vdn", "SpreadDiscrete-v0", (), -51.0, 1_000_000),
    **{
        f"{algo}-gym-cartpole": (algo, "CartPole-v1", GYM, 475, 100_000)
        for algo in ("dqn", "double_dqn", "d3qn", "sac_discrete")
    },
    **{
        f"{algo}-gym-pendulum": (algo, "Pendulum-v1", GYM, -200, 30_000)
        for algo in ("ddpg", "td3", "sac", "modsac", "redq")
    },
}


# Seed 0 of every case runs in the full tier (CI); seeds 1 and 2 carry the marker `seeds` and run
# in `make test-all` (README, "Development": their minutes do not fit CI's time).
SEEDS = [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
# (case, seed) -> the defect it shows, open in the tracker: expected to fail until it is fixed
KNOWN_FAILURES: dict[tuple[str, int], str] = {}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", SEEDS)
def test_solves_on_every_seed(cli, tmp_path, case, seed, request):
    if (case, seed) in KNOWN_FAILURES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_FAILURES[case, seed], strict=False))
    algo, env, extra, target, budget = CASES[case]
    summary = train(cli, tmp_path, algo, env, seed, *extra, max_steps=budget)
    assert summary["solved"], summary
    assert summary["final_eval_mean"] >= target
    assert summary["steps_to_target"] <= budget


LEARNERS = ("--learners", "2")
DISTRIBUTED_CASES = {  # id: (algo, env, target, env-step budget), with 2 gloo learner ranks
    "ppo-cartpole-2-learners": ("ppo", "CartPole-v1", 475, 2_000_000),
    "ppo-pendulum-2-learners": ("ppo", "Pendulum-v1", -200, 8_000_000),
    "sac-pendulum-2-learners": ("sac", "Pendulum-v1", -200, 60_000),
    "modsac-pendulum-2-learners": ("modsac", "Pendulum-v1", -200, 60_000),
}


@pytest.mark.distributed
@pytest.mark.parametrize("case", list(DISTRIBUTED_CASES))
@pytest.mark.parametrize("seed", SEEDS)
def test_two_learners_solve_on_every_seed(cli, tmp_path, case, seed):
    algo, env, target, budget = DISTRIBUTED_CASES[case]
    summary = train(cli, tmp_path, algo, env, seed, *LEARNERS, max_steps=budget)
    assert summary["world_size"] == 2 and summary["solved"], summary
    assert summary["final_eval_mean"] >= target
