"""Tests of `TorchGymVectorEnv`: gymnasium's vector API over xiaoyarl's torch-native envs."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from xiaoyarl.envs.classic import TORCH_ENVS
from xiaoyarl.envs.gym_registration import TORCH_ENV_LIMITS
from xiaoyarl.envs.gym_vector import TORCH_ENVS as GYM_VECTOR_ENVS
from xiaoyarl.envs.gym_vector import TorchGymVectorEnv
from xiaoyarl.errors import EnvError


def assert_batch_in_space(batch: np.ndarray, space: gymnasium.Space) -> None:
    for row in batch:
        assert space.contains(row), (row, space)


def test_registration_lists_every_env_with_its_own_limits():
    """`import xiaoyarl` registers the envs from a table, without loading them: it must name
    every env `TorchGymVectorEnv` makes, with the time limit and target its class sets."""
    own = {env_id: (cls.max_step, cls.target_return) for env_id, cls in GYM_VECTOR_ENVS.items()}
    assert TORCH_ENV_LIMITS == own
    for env_id, (max_step, target_return) in own.items():
        spec = gymnasium.spec(f"xiaoyarl/{env_id}")
        assert (spec.max_episode_steps, spec.reward_threshold) == (max_step, target_return)


# --- spaces, dtypes, shapes ---------------------------------------------------------------------
@pytest.mark.parametrize("env_id", list(TORCH_ENVS))
def test_spaces_dtypes_and_shapes(env_id):
    n = 3
    envs = TorchGymVectorEnv(env_id, num_envs=n, seed=0, max_episode_steps=6)
    assert envs.num_envs == n
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    if env_id in gymnasium.registry:  # gymnasium's single env of the same task
        own = gymnasium.make(env_id)
        assert envs.single_observation_space == own.observation_space
        assert envs.single_action_space == own.action_space
        assert envs.observation_space.shape == (n, *own.observation_space.shape)
        assert envs.action_space.shape == (n, *own.action_space.shape)
        own.close()
    else:  # an env of xiaoyarl's own (CartPole observed in part): unbounded observations
        assert envs.single_observation_space.shape == (TORCH_ENVS[env_id].state_dim,)

    obs, info = envs.reset(seed=1)
    assert obs.dtype == np.float32 and obs.shape == envs.observation_space.shape and info == {}
    assert envs.observation_space.contains(obs)
    envs.action_space.seed(0)
    ended = 0
    for _ in range(13):  # two time limits of 6 steps
        actions = envs.action_space.sample()
        assert_batch_in_space(actions, envs.single_action_space)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        assert obs.dtype == np.float32 and obs.shape == (n, envs.single_observation_space.shape[0])
        assert rewards.dtype == np.float64 and rewards.shape == (n,)
        assert terminations.dtype == np.bool_ and terminations.shape == (n,)
        assert truncations.dtype == np.bool_ and truncations.shape == (n,)
        assert_batch_in_space(obs, envs.single_observation_space)
        if infos:
            ended += int(infos["_final_obs"].sum())
            for i in np.flatnonzero(infos["_final_obs"]):
                assert envs.single_observation_space.contains(infos["final_obs"][i])
    assert ended >= 2 * n  # every sub-env reached the time limit twice (or ended earlier)
    envs.close()
    assert envs.closed


def test_same_step_autoreset_matches_the_wrapped_env():
    """Observations after a done step are the next episode's first; final_obs the last ones."""
    n, seed, limit = 4, 3, 15
    envs = TorchGymVectorEnv("CartPole-v1", num_envs=n, seed=seed, max_episode_steps=limit)
    ref = TORCH_ENVS["CartPole-v1"](n, seed=seed)
    ref.max_step = limit
    obs, _ = envs.reset(seed=seed)
    state, _ = ref.reset(seed=seed)
    np.testing.assert_array_equal(obs, state.numpy())

    rng = np.random.default_rng(0)
    n_term = n_trunc = 0
    for _ in range(60):
        actions = rng.integers(0, 2, size=n)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        state, reward, terminated, truncated, info = ref.step(torch.as_tensor(actions))
        np.testing.assert_array_equal(obs, state.numpy())
        np.testing.assert_array_equal(rewards, reward.numpy().astype(np.float64))
        np.testing.assert_array_equal(terminations, terminated.numpy())
        np.testing.assert_array_equal(truncations, truncated.numpy())
        done = terminations | truncations
        n_term, n_trunc = n_term + terminations.sum(), n_trunc + truncations.sum()
        if not done.any():
            assert infos == {}
            continue
        np.testing.assert_array_equal(infos["_final_obs"], done)
        np.testing.assert_array_equal(infos["_final_info"], done)
        assert infos["final_obs"].dtype == object and infos["final_info"] == {}
        for i in range(n):
            if done[i]:
                np.testing.assert_array_equal(infos["final_obs"][i], info["final_state"][i])
                assert not np.array_equal(infos["final_obs"][i], obs[i])  # a fresh episode
            else:
                assert infos["final_obs"][i] is None
    assert n_term > 0 and n_trunc > 0


def test_info_keys_match_gymnasiums_own_same_step_vector_env():
    ref = gymnasium.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    envs = TorchGymVectorEnv("CartPole-v1", num_envs=2, seed=0)
    found = {}
    for name, venv in (("gymnasium", ref), ("xiaoyarl", envs)):
        venv.reset(seed=0)
        for _ in range(200):
            *_, infos = venv.step(np.ones(2, dtype=np.int64))  # always right: ends quickly
            if infos:
                found[name] = {k: (type(v), getattr(v, "dtype", None)) for k, v in infos.items()}
                break
    ref.close()
    assert found["xiaoyarl"] == found["gymnasium"]


# --- actions and dynamics -----------------------------------------------------------------------
def test_continuous_actions_are_rescaled_from_the_true_bounds():
    envs = TorchGymVectorEnv("Pendulum-v1", num_envs=3, seed=0)
    ref = TORCH_ENVS["Pendulum-v1"](3, seed=0)
    envs.reset(seed=5)
    ref.reset(seed=5)
    torques = np.array([[-2.0], [0.5], [2.0]], dtype=np.float32)  # Pendulum's bounds: [-2, 2]
    obs, rewards, *_ = envs.step(torques)
    state, reward, *_ = ref.step(torch.tensor([[-1.0], [0.25], [1.0]]))
    np.testing.assert_array_equal(obs, state.numpy())
    np.testing.assert_array_equal(rewards, reward.numpy())


@pytest.mark.parametrize(
    ("env_id", "sim_state", "action", "gym_action"),
    [
        ("CartPole-v1", [0.1, -0.3, 0.05, 0.4], np.array([1]), 1),
        ("Pendulum-v1", [2.5, -1.5], np.array([[1.3]], np.float32), np.array([1.3], np.float32)),
    ],
)
def test_one_transition_equals_gymnasiums_env(env_id, sim_state, action, gym_action):
    envs = TorchGymVectorEnv(env_id, num_envs=1, seed=0)
    envs.reset(seed=0)
    envs.env.set_sim_state(torch.tensor([sim_state]))
    own = gymnasium.make(env_id)
    own.reset(seed=0)
    own.unwrapped.state = np.array(sim_state, dtype=np.float64)
    obs, rewards, terminations, truncations, _ = envs.step(action)
    ref_obs, ref_reward, ref_terminated, ref_truncated, _ = own.step(gym_action)
    own.close()
    np.testing.assert_allclose(obs[0], ref_obs, rtol=0, atol=1e-5)
    assert rewards[0] == pytest.approx(ref_reward, abs=1e-5)
    assert (terminations[0], truncations[0]) == (ref_terminated, ref_truncated)


def test_bad_actions_and_arguments_raise():
    envs = TorchGymVectorEnv("CartPole-v1", num_envs=2)
    envs.reset(seed=0)
    with pytest.raises(EnvError, match=r"shape \(2,\)"):
        envs.step(np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(EnvError, match=r"in \[0, 1\]"):
        envs.step(np.array([0, 2]))
    with pytest.raises(EnvError, match="one int"):
        envs.reset(seed=[0, 1])
    with pytest.raises(EnvError, match="reset_mask"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    with pytest.raises(EnvError, match="no torch-native env named 'LunarLander-v3'"):
        TorchGymVectorEnv("LunarLander-v3")


def test_seeded_resets_are_reproducible():
    envs = TorchGymVectorEnv("Acrobot-v1", num_envs=2)
    first, _ = envs.reset(seed=7)
    again, _ = envs.reset(seed=7)
    other, _ = envs.reset(seed=8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


# --- gymnasium registration ---------------------------------------------------------------------
@pytest.mark.parametrize("env_id", list(TORCH_ENVS))
def test_make_vec_returns_the_torch_env(env_id):
    envs = gymnasium.make_vec(
        f"xiaoyarl/{env_id}", num_envs=8, vectorization_mode="vector_entry_point"
    )
    assert isinstance(envs, TorchGymVectorEnv) and envs.num_envs == 8
    assert envs.env.spec.name == env_id and envs.env.max_step == TORCH_ENVS[env_id].max_step
    assert envs.spec.id == f"xiaoyarl/{env_id}"
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (8, TORCH_ENVS[env_id].state_dim)
    envs.close()


def test_make_vec_defaults_to_the_torch_env_and_passes_kwargs():
    envs = gymnasium.make_vec("xiaoyarl/Pendulum-v1", num_envs=2, max_episode_steps=3, seed=4)
    assert isinstance(envs, TorchGymVectorEnv) and envs.env.max_step == 3
    envs.reset()
    for _ in range(3):
        *_, truncations, infos = envs.step(np.zeros((2, 1), dtype=np.float32))
    assert truncations.all() and infos["_final_obs"].all()


def test_cleanrl_style_episode_returns():
    """A CleanRL-style loop with RecordEpisodeStatistics: CartPole returns equal lengths."""
    num_envs = 4
    envs = gymnasium.make_vec("xiaoyarl/CartPole-v1", num_envs=num_envs)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    obs, _ = envs.reset(seed=1)
    by_hand = np.zeros(num_envs)
    returns, expected = [], []
    for _ in range(300):
        actions = (obs[:, 2] > 0).astype(np.int64)  # a "policy": push towards the pole's lean
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        by_hand += rewards
        if "episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                returns.append(float(infos["episode"]["r"][i]))
                assert infos["episode"]["r"][i] == infos["episode"]["l"][i]  # 1 per step
        for i in np.flatnonzero(terminations | truncations):
            expected.append(by_hand[i])
            by_hand[i] = 0.0
        obs = next_obs
    envs.close()
    assert len(returns) >= 8 and sorted(returns) == sorted(expected)
    assert all(8 <= r <= 500 for r in returns)
    assert np.mean(returns) > 30  # beats random play (~22): observations and actions line up
