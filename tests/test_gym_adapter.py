"""Tests of `GymVecEnv`: shapes, action rescaling, auto-reset semantics, custom envs, errors."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import gymnasium
import numpy as np
import pytest
import torch

from xiaoyarl.envs.gym import DEFAULT_MAX_STEP, GymVecEnv
from xiaoyarl.errors import EnvError

# A module registering small test envs on import, written to tmp_path by the `env_module`
# fixture so that the 'module:Env-v0' form (and async workers) can import it.
ENV_MODULE = textwrap.dedent(
    """
    import gymnasium
    import numpy as np
    from gymnasium import spaces


    class Counter(gymnasium.Env):
        # Observation [t, t * scale]: t counts steps; never terminates by itself.
        observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        action_space = spaces.Discrete(3)

        def __init__(self, scale=1.0, nan_at=None, nan_seed=None, obs_shape=(2,)):
            # NaN observations from step `nan_at` on, in the sub-env reset with seed `nan_seed`.
            self.scale, self.nan_at, self.nan_seed = scale, nan_at, nan_seed
            self.obs_shape = obs_shape
            self.t, self.seed = 0, None

        def _obs(self):
            obs = np.full(self.obs_shape, float(self.t))
            obs.flat[-1] = self.t * self.scale
            if self.nan_at is not None and self.t >= self.nan_at and self.seed == self.nan_seed:
                obs[...] = np.nan
            return obs

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.seed = self.seed if seed is None else seed
            self.t = 0
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), float(action), False, False, {}


    class SequenceObs(Counter):
        observation_space = spaces.Sequence(spaces.Box(-1, 1, (2,)))


    class DictAct(Counter):  # a Dict of Discrete and Box parts is read; a Text part is not
        action_space = spaces.Dict({"a": spaces.Discrete(2), "say": spaces.Text(4)})


    class UnboundedAct(Counter):
        action_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)


    for name, cls, steps in [
        ("Counter", Counter, 5),
        ("CounterNoLimit", Counter, None),
        ("SequenceObs", SequenceObs, 5),
        ("DictAct", DictAct, 5),
        ("UnboundedAct", UnboundedAct, 5),
    ]:
        gymnasium.register(f"{__name__}/{name}-v0", entry_point=cls, max_episode_steps=steps)
    """
)


@pytest.fixture
def env_module(tmp_path, monkeypatch):
    """Name of an importable module that registers `<name>/Counter-v0` and friends."""
    name = f"xiaoyarl_test_envs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(ENV_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    for env_id in [k for k in gymnasium.registry if k.startswith(f"{name}/")]:
        del gymnasium.registry[env_id]


# --- shapes, dtypes, spec ---------------------------------------------------------------------
def test_cartpole_shapes_dtypes_and_spec():
    with GymVecEnv("CartPole-v1", num_envs=3, seed=0) as env:
        spec = env.spec
        assert (spec.name, spec.num_envs, spec.state_dim, spec.action_dim) == (
            "CartPole-v1",
            3,
            4,
            2,
        )
        assert spec.if_discrete and spec.max_step == 500 and spec.target_return == 475.0
        assert spec.action_low is None and spec.action_high is None

        state, info = env.reset()
        assert state.shape == (3, 4) and state.dtype == torch.float32
        assert isinstance(info, dict)
        state, reward, terminated, truncated, info = env.step(torch.zeros(3, dtype=torch.int64))
        assert state.shape == (3, 4) and state.dtype == torch.float32
        assert reward.shape == (3,) and reward.dtype == torch.float32
        assert terminated.shape == (3,) and terminated.dtype == torch.bool
        assert truncated.shape == (3,) and truncated.dtype == torch.bool
        assert info["final_state"].shape == (3, 4) and info["final_state"].dtype == torch.float32
        assert torch.equal(info["final_state"], state)  # nothing ended on the first step
        assert state.is_contiguous() and info["final_state"].is_contiguous()


def test_returned_tensors_are_not_overwritten_by_later_steps():
    with GymVecEnv("CartPole-v1", num_envs=2, seed=0) as env:
        state0, _ = env.reset()
        kept = state0.clone()
        state1, *_ = env.step(torch.ones(2, dtype=torch.int64))
        kept1 = state1.clone()
        env.step(torch.ones(2, dtype=torch.int64))
        assert torch.equal(state0, kept) and torch.equal(state1, kept1)


def test_pendulum_actions_are_rescaled_to_the_bounds():
    seed, n = 3, 2
    with GymVecEnv("Pendulum-v1", num_envs=n, seed=seed) as env:
        assert not env.spec.if_discrete and env.spec.action_dim == 1
        assert env.spec.action_low == (-2.0,) and env.spec.action_high == (2.0,)
        assert env.spec.target_return == -200.0 and env.spec.max_step == 200
        plain = [gymnasium.make("Pendulum-v1") for _ in range(n)]
        state, _ = env.reset()
        ref = [plain[i].reset(seed=seed + i)[0] for i in range(n)]
        torch.testing.assert_close(state, torch.tensor(np.stack(ref), dtype=torch.float32))

        low, high = plain[0].action_space.low, plain[0].action_space.high
        rng = np.random.default_rng(0)
        for _ in range(5):
            action = rng.uniform(-1, 1, size=(n, 1)).astype(np.float32)  # (n, action_dim)
            state, reward, *_ = env.step(torch.as_tensor(action))
            results = [plain[i].step(low + (action[i] + 1) * 0.5 * (high - low)) for i in range(n)]
            ref_obs = torch.tensor(np.stack([r[0] for r in results]), dtype=torch.float32)
            ref_reward = torch.tensor([r[1] for r in results], dtype=torch.float32)
            torch.testing.assert_close(state, ref_obs, rtol=0, atol=1e-6)
            torch.testing.assert_close(reward, ref_reward, rtol=0, atol=1e-6)
        for p in plain:
            p.close()


def test_seeds_are_seed_plus_index_and_constructor_seed_is_used_first():
    with GymVecEnv("CartPole-v1", num_envs=2, seed=11) as env:
        first, _ = env.reset()
        again, _ = env.reset(seed=11)
        other, _ = env.reset(seed=12)
    plain = gymnasium.make("CartPole-v1")
    ref = [plain.reset(seed=11 + i)[0] for i in range(2)]
    plain.close()
    expected = torch.tensor(np.stack(ref), dtype=torch.float32)
    assert torch.equal(first, expected) and torch.equal(again, expected)
    assert torch.equal(other[0], expected[1])  # sub-env 0 with seed 12 == sub-env 1 with 11


# --- auto-reset semantics ---------------------------------------------------------------------
def test_autoreset_matches_single_envs_stepped_by_hand():
    """Sync and async adapters match plain envs exactly, with no extra transition per episode."""
    n, seed, limit, horizon = 2, 5, 20, 120
    kwargs = {"max_episode_steps": limit}  # random CartPole episodes both terminate and truncate
    sync = GymVecEnv("CartPole-v1", num_envs=n, seed=seed, env_kwargs=kwargs)
    asyn = GymVecEnv("CartPole-v1", num_envs=n, seed=seed, vector_mode="async", env_kwargs=kwargs)
    plain = [gymnasium.make("CartPole-v1", **kwargs) for _ in range(n)]
    try:
        assert sync.spec.max_step == asyn.spec.max_step == limit
        ref_state = np.stack([plain[i].reset(seed=seed + i)[0] for i in range(n)])
        for env in (sync, asyn):
            state, _ = env.reset()
            assert torch.equal(state, torch.tensor(ref_state, dtype=torch.float32))

        rng = np.random.default_rng(0)
        lengths = {"sync": [[] for _ in range(n)], "async": [[] for _ in range(n)]}
        ref_lengths: list[list[int]] = [[] for _ in range(n)]
        counts = {"sync": [0] * n, "async": [0] * n}
        ref_counts = [0] * n
        n_term = n_trunc = 0
        for _ in range(horizon):
            action = rng.integers(0, 2, size=n)  # (n,)
            ref = [plain[i].step(int(action[i])) for i in range(n)]
            ref_final = np.stack([r[0] for r in ref])
            ref_next = ref_final.copy()
            for i, (_, _, term, trunc, _) in enumerate(ref):
                ref_counts[i] += 1
                if term or trunc:
                    ref_next[i] = plain[i].reset()[0]  # auto-reset continues the env's RNG
                    ref_lengths[i].append(ref_counts[i])
                    ref_counts[i] = 0
                    n_term, n_trunc = n_term + term, n_trunc + trunc
            for mode, env in (("sync", sync), ("async", asyn)):
                state, reward, terminated, truncated, info = env.step(torch.as_tensor(action))
                # The true last observation, then the fresh reset observation.
                assert torch.equal(
                    info["final_state"], torch.tensor(ref_final, dtype=torch.float32)
                )
                assert torch.equal(state, torch.tensor(ref_next, dtype=torch.float32))
                assert torch.equal(reward, torch.tensor([r[1] for r in ref], dtype=torch.float32))
                assert terminated.tolist() == [r[2] for r in ref], mode
                assert truncated.tolist() == [r[3] for r in ref], mode
                for i in range(n):
                    counts[mode][i] += 1
                    if terminated[i] or truncated[i]:
                        lengths[mode][i].append(counts[mode][i])
                        counts[mode][i] = 0
        assert n_term > 0 and n_trunc > 0  # both kinds of episode end were exercised
        assert lengths["sync"] == lengths["async"] == ref_lengths
        assert all(0 < length <= limit for per_env in ref_lengths for length in per_env)
    finally:
        sync.close()
        asyn.close()
        for p in plain:
            p.close()


def test_close_is_idempotent_and_closed_env_refuses_to_step():
    env = GymVecEnv("CartPole-v1", num_envs=2)
    with pytest.raises(EnvError, match="reset"):
        env.step(torch.zeros(2, dtype=torch.int64))
    env.reset(seed=0)
    env.close()
    env.close()
    with pytest.raises(EnvError, match="closed"):
        env.step(torch.zeros(2, dtype=torch.int64))


def test_wrong_action_shape_raises():
    with GymVecEnv("CartPole-v1", num_envs=2, seed=0) as env:
        env.reset()
        with pytest.raises(EnvError, match=r"shape \(2,\)"):
            env.step(torch.zeros(2, 1, dtype=torch.int64))


# --- custom envs through 'module:Env-v0' ------------------------------------------------------
def test_custom_env_from_a_module(env_module):
    env_id = f"{env_module}:{env_module}/Counter-v0"
    with GymVecEnv(env_id, num_envs=2, seed=0, env_kwargs={"scale": 2.0}) as env:
        spec = env.spec
        assert spec.name == f"{env_module}/Counter-v0"
        assert (spec.state_dim, spec.action_dim, spec.if_discrete) == (2, 3, True)
        assert spec.max_step == 5 and spec.target_return is None
        state, _ = env.reset()
        assert torch.equal(state, torch.zeros(2, 2))
        for t in range(1, 6):
            state, reward, terminated, truncated, info = env.step(torch.tensor([1, 2]))
            assert torch.equal(reward, torch.tensor([1.0, 2.0]))
            assert not terminated.any()
            assert truncated.tolist() == [t == 5, t == 5]
            assert torch.equal(info["final_state"], torch.tensor([[t, 2.0 * t]] * 2))
        assert torch.equal(state, torch.zeros(2, 2))  # reset after the time limit


def test_env_without_time_limit_gets_the_default(env_module):
    with GymVecEnv(f"{env_module}:{env_module}/CounterNoLimit-v0") as env:
        assert env.spec.max_step == DEFAULT_MAX_STEP


# --- bad observations -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("vector_mode", "nan_at", "where"),
    [("sync", 0, "on reset"), ("sync", 3, "at step 3"), ("async", 2, "at step 2")],
)
def test_nan_observation_raises_with_env_id(env_module, vector_mode, nan_at, where):
    env_id = f"{env_module}:{env_module}/Counter-v0"
    kwargs = {"nan_at": nan_at, "nan_seed": 1}  # only sub-env 1 (seeded 0 + 1) goes bad
    env = GymVecEnv(env_id, num_envs=2, vector_mode=vector_mode, env_kwargs=kwargs)
    try:
        with pytest.raises(EnvError, match="NaN") as excinfo:
            env.reset(seed=0)
            for _ in range(4):
                env.step(torch.zeros(2, dtype=torch.int64))
        message = str(excinfo.value)
        assert f"{env_module}/Counter-v0" in message and "sub-env 1" in message
        assert where in message
    finally:
        env.close()


def test_wrong_observation_shape_raises(env_module):
    env_id = f"{env_module}:{env_module}/Counter-v0"
    with GymVecEnv(env_id, num_envs=2, env_kwargs={"obs_shape": (3,)}) as env:
        with pytest.raises(EnvError, match=r"shape is \(3,\).*shape \(2,\)") as excinfo:
            env.reset()
        assert f"{env_module}/Counter-v0" in str(excinfo.value)


# --- unknown ids, unsupported spaces, missing simulators --------------------------------------
def test_unknown_id_suggests_close_matches():
    with pytest.raises(EnvError, match="unknown environment 'CartPole-v9'") as excinfo:
        GymVecEnv("CartPole-v9")
    assert "'CartPole-v1'" in str(excinfo.value)


def test_a_minigrid_id_needs_no_prefix_and_says_what_to_install(monkeypatch):
    """MiniGrid registers its envs when imported: its ids work as Atari's do, without a
    `minigrid:` prefix; where the package is missing, the error names it."""
    if importlib.util.find_spec("minigrid") is not None:  # installed: the env is made
        env = GymVecEnv("MiniGrid-Empty-5x5-v0")
        assert env.spec.num_envs == 1
        env.close()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.delitem(gymnasium.registry, "MiniGrid-Empty-5x5-v0", raising=False)
    with pytest.raises(EnvError, match=r"an env of the minigrid package, which is not "
                                       r"installed: `pip install minigrid`"):  # fmt: skip
        GymVecEnv("MiniGrid-Empty-5x5-v0")


def test_module_that_fails_to_import_raises():
    with pytest.raises(EnvError, match="importing module 'no_such_module_xyz' failed"):
        GymVecEnv("no_such_module_xyz:Foo-v0")


def test_module_that_does_not_register_the_id_raises(env_module):
    with pytest.raises(EnvError, match="did not register it"):
        GymVecEnv(f"{env_module}:NotThere-v0")


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("SequenceObs", "observation space Sequence"),
        ("DictAct", "action part say is a Text space"),
        ("UnboundedAct", "infinite bounds"),
    ],
)
def test_unsupported_spaces_raise(env_module, name, pattern):
    with pytest.raises(EnvError, match=pattern):
        GymVecEnv(f"{env_module}:{env_module}/{name}-v0")


@pytest.mark.parametrize(
    ("env_id", "module", "extra"),
    [("LunarLander-v3", "Box2D", "box2d"), ("Hopper-v5", "mujoco", "mujoco")],
)
def test_missing_simulator_names_the_pip_extra(env_id, module, extra):
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed")
    with pytest.raises(EnvError, match=rf"pip install -e '\.\[{extra}\]'"):
        GymVecEnv(env_id)


def test_bad_arguments_raise():
    with pytest.raises(EnvError, match="num_envs"):
        GymVecEnv("CartPole-v1", num_envs=0)
    with pytest.raises(EnvError, match="vector_mode"):
        GymVecEnv("CartPole-v1", vector_mode="threads")
    with pytest.raises(EnvError, match="env_kwargs"):
        GymVecEnv("CartPole-v1", env_kwargs={"no_such_kwarg": 1})
