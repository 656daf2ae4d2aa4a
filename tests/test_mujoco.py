"""The `mujoco` extra works: MuJoCo tasks through the gymnasium adapter, observations passed
on unclipped, and `xiaoyarl train sac Hopper-v5` runs end to end. Skipped where the extra is
not installed (`pip install -e '.[mujoco]'`); the default suite needs none of the extras."""

import json

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from xiaoyarl.envs import make_env  # noqa: E402


@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5"])
def test_mujoco_tasks_step_as_gymnasium_does(env_id):
    env = make_env(env_id, 2, seed=5)
    obs, _ = env.reset(seed=5)
    reference = gymnasium.make(env_id)
    expected, _ = reference.reset(seed=5)
    assert obs.dtype == torch.float32 and obs.shape == (2, *reference.observation_space.shape)
    np.testing.assert_allclose(obs[0].numpy(), expected, rtol=1e-6, atol=1e-6)

    # the same action, rescaled from [-1, 1] to the env's bounds: the same next observation
    action = np.linspace(-0.9, 0.9, env.spec.action_dim, dtype=np.float32)
    low, high = reference.action_space.low, reference.action_space.high
    obs, reward, _, _, _ = env.step(torch.tensor(np.stack([action, action])))
    expected, expected_reward, *_ = reference.step(low + (action + 1) / 2 * (high - low))
    np.testing.assert_allclose(obs[0].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert reward[0].item() == pytest.approx(expected_reward, rel=1e-5, abs=1e-5)
    env.close()


def test_observations_are_not_clipped():
    """HalfCheetah's joint velocities leave [-10, 10] under random actions (it clips nothing,
    unlike Hopper and Walker2d, which clip their own velocities); the adapter passes them on
    as gymnasium gives them."""
    env = make_env("HalfCheetah-v5", 1, seed=0)
    reference = gymnasium.make("HalfCheetah-v5")
    env.reset(seed=0)
    reference.reset(seed=0)
    low, high = reference.action_space.low, reference.action_space.high
    gen = np.random.default_rng(0)
    largest = 0.0
    for _ in range(300):
        action = gen.uniform(-1, 1, env.spec.action_dim).astype(np.float32)
        obs, *_ = env.step(torch.tensor(action[None]))
        expected, *_ = reference.step(low + (action + 1) / 2 * (high - low))
        np.testing.assert_allclose(obs[0].numpy(), expected, rtol=1e-4, atol=1e-4)
        largest = max(largest, obs.abs().max().item())
    env.close()
    assert largest > 10.0


def test_train_sac_on_hopper_through_the_cli(tmp_path, cli):
    summary_path = tmp_path / "summary.json"
    result = cli(
        "train", "sac", "Hopper-v5", "--max-steps", "600", "--threads", "1", "--quiet",
        "--eval-every", "300", "--eval-episodes", "2", "--set", "learning_starts=200",
        "--set", "net_dims=[32,32]", "--set", "batch_size=32",
        "--cwd", str(tmp_path / "run"), "--summary-json", str(summary_path), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["total_steps"] >= 600 and np.isfinite(summary["final_eval_mean"])
    assert (tmp_path / "run" / "checkpoint").is_dir()
