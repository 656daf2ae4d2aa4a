"""The torch classic-control envs against gymnasium's own, and the TorchVecEnv contract on them.

The dynamics tests put a batch of random simulator states into the torch env and, one at a
time, into gymnasium's env (`env.unwrapped.state`, plus the TimeLimit's step counter), take
one step in both and compare observation, reward and both flags.
"""

from __future__ import annotations

import math
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.wrappers import TimeLimit

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.envs.classic import TORCH_ENVS
from xiaoyarl.envs.targets import DEFAULT_TARGET_RETURNS

# the envs with a gymnasium twin (the NoVelocity ones are CartPole-v1 and Pendulum-v1 observed in
# part)
ENV_IDS = [env_id for env_id in TORCH_ENVS if "NoVelocity" not in env_id]
NUM_TRANSITIONS = 600


def _uniform(gen: torch.Generator, n: int, bounds: list[tuple[float, float]]) -> torch.Tensor:
    """`(n, len(bounds))` float32, column j uniform in `bounds[j]`."""
    low = torch.tensor([b[0] for b in bounds])
    high = torch.tensor([b[1] for b in bounds])
    return low + (high - low) * torch.rand((n, len(bounds)), generator=gen)


def _random_states(env_id: str, gen: torch.Generator, n: int) -> torch.Tensor:
    """`(n, sim_dim)` states covering the interesting region: thresholds, clips and walls."""
    if env_id == "CartPole-v1":  # |x| > 2.4 and |theta| > 0.2095 both terminate
        return _uniform(gen, n, [(-2.6, 2.6), (-3.0, 3.0), (-0.26, 0.26), (-3.5, 3.5)])
    if env_id == "Pendulum-v1":  # unnormalized angles; speeds beyond the clip at 8
        return _uniform(gen, n, [(-3 * math.pi, 3 * math.pi), (-10.0, 10.0)])
    if env_id == "Acrobot-v1":  # velocity bounds are 4 pi and 9 pi
        return _uniform(gen, n, [(-math.pi, math.pi)] * 2 + [(-13.0, 13.0), (-29.0, 29.0)])
    if env_id == "MountainCarContinuous-v0":  # a third next to each wall / the goal
        states = _uniform(gen, n, [(-1.2, 0.6), (-0.07, 0.07)])
        near_left = _uniform(gen, n, [(-1.2, -1.1), (-0.07, 0.0)])
        near_goal = _uniform(gen, n, [(0.38, 0.6), (-0.02, 0.07)])
        which = torch.randint(0, 3, (n, 1), generator=gen)
        return torch.where(which == 0, states, torch.where(which == 1, near_left, near_goal))
    raise KeyError(env_id)


def _random_actions(env: TorchVecEnv, gen: torch.Generator) -> torch.Tensor:
    """Discrete `(n,)` int64, or continuous `(n, action_dim)` a little beyond [-1, 1]."""
    n = env.num_envs
    if env.spec.if_discrete:
        return torch.randint(0, env.spec.action_dim, (n,), generator=gen)
    return torch.rand((n, env.spec.action_dim), generator=gen) * 2.6 - 1.3


def _gym_action(env_id: str, action: torch.Tensor) -> int | np.ndarray:
    """The action gymnasium expects for one of our agent-side actions."""
    if env_id == "Pendulum-v1":  # the agent's [-1, 1] is gymnasium's [-2, 2] torque
        return (2.0 * action).numpy().astype(np.float32)
    if env_id == "MountainCarContinuous-v0":
        return action.numpy().astype(np.float32)
    return int(action)


def _gym_step_from(
    env: gymnasium.Env, env_id: str, state: np.ndarray, elapsed: int, action: int | np.ndarray
) -> tuple:
    """One gymnasium step from a given internal state and episode step count."""
    time_limit = env
    while not isinstance(time_limit, TimeLimit):
        time_limit = time_limit.env
    time_limit._elapsed_steps = elapsed
    env.unwrapped.state = state.copy()
    if env_id == "CartPole-v1":
        env.unwrapped.steps_beyond_terminated = None  # else a second termination pays 0
    return env.step(action)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_dynamics_match_gymnasium(env_id: str) -> None:
    gen = torch.Generator().manual_seed(1234)
    env = TORCH_ENVS[env_id](NUM_TRANSITIONS, seed=0)
    n, max_step = NUM_TRANSITIONS, env.spec.max_step
    states = _random_states(env_id, gen, n)  # (n, sim_dim)
    elapsed = torch.randint(0, max_step, (n,), generator=gen)
    elapsed[torch.rand(n, generator=gen) < 0.1] = max_step - 1  # these hit the time limit
    actions = _random_actions(env, gen)

    env.set_sim_state(states, elapsed)
    _, reward, terminated, truncated, info = env.step(actions)
    obs = info["final_state"]  # (n, state_dim): before the auto-reset

    gym_env = gymnasium.make(env_id)
    gym_env.reset(seed=0)
    gym_obs, gym_reward, gym_terminated, gym_truncated, gym_state = [], [], [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out-of-bounds states / actions are on purpose
        for i in range(n):
            o, r, term, trunc, _ = _gym_step_from(
                gym_env,
                env_id,
                states[i].numpy().astype(np.float64),
                int(elapsed[i]),
                _gym_action(env_id, actions[i]),
            )
            gym_obs.append(o)
            gym_reward.append(r)
            gym_terminated.append(term)
            gym_truncated.append(trunc)
            gym_state.append(np.asarray(gym_env.unwrapped.state, dtype=np.float64))
    gym_env.close()

    expected_obs = torch.as_tensor(np.stack(gym_obs), dtype=torch.float32)
    tol = 1e-4 if env_id == "Acrobot-v1" else 1e-5  # float32 RK4 at speeds up to 9 pi
    torch.testing.assert_close(obs, expected_obs, atol=tol, rtol=tol)
    torch.testing.assert_close(
        reward, torch.tensor(gym_reward, dtype=torch.float32), atol=1e-4, rtol=1e-5
    )
    assert torch.equal(terminated, torch.tensor(gym_terminated))
    assert torch.equal(truncated, torch.tensor(gym_truncated))
    # the internal state too (angles wrapped the same way), where no auto-reset replaced it
    go_on = ~(terminated | truncated)
    expected_state = torch.as_tensor(np.stack(gym_state), dtype=torch.float32)
    torch.testing.assert_close(env.sim_state[go_on], expected_state[go_on], atol=tol, rtol=tol)

    # the random states did reach the cases the comparison is meant to cover
    assert truncated.sum() >= 20
    if env_id != "Pendulum-v1":
        assert 20 <= terminated.sum() <= n - 20
    if env_id == "Pendulum-v1":
        assert (obs[:, 2].abs() == 8.0).sum() >= 20  # speed clipped
    if env_id == "MountainCarContinuous-v0":
        assert ((obs[:, 0] == -1.2) & (obs[:, 1] == 0.0)).sum() >= 20  # stopped by the wall


# Where each env's initial states lie, per simulator variable (inclusive bounds).
INITIAL_BOUNDS: dict[str, list[tuple[float, float]]] = {
    "CartPole-v1": [(-0.05, 0.05)] * 4,
    "Pendulum-v1": [(-math.pi, math.pi), (-1.0, 1.0)],
    "Acrobot-v1": [(-0.1, 0.1)] * 4,
    "MountainCarContinuous-v0": [(-0.6, -0.4), (0.0, 0.0)],
}


def _within_initial_bounds(env_id: str, sim_state: torch.Tensor) -> torch.Tensor:
    """`(n,)` bool: is each simulator state inside the initial distribution's support?"""
    bounds = INITIAL_BOUNDS[env_id]
    low = torch.tensor([b[0] for b in bounds]) - 1e-6
    high = torch.tensor([b[1] for b in bounds]) + 1e-6
    return ((sim_state >= low) & (sim_state <= high)).all(dim=1)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_initial_distribution_covers_gymnasium_bounds(env_id: str) -> None:
    env = TORCH_ENVS[env_id](4096, seed=0)
    state, _ = env.reset(seed=5)
    assert _within_initial_bounds(env_id, env.sim_state).all()
    torch.testing.assert_close(state, env._observe(env.sim_state))
    for j, (low, high) in enumerate(INITIAL_BOUNDS[env_id]):
        column = env.sim_state[:, j]
        margin = 0.01 * (high - low)  # uniform: 4096 draws come close to both ends
        assert column.min() <= low + margin and column.max() >= high - margin


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_auto_reset(env_id: str) -> None:
    gen = torch.Generator().manual_seed(7)
    n = 256
    env = TORCH_ENVS[env_id](n, seed=0)
    max_step = env.spec.max_step
    elapsed = torch.randint(0, max_step - 1, (n,), generator=gen)
    elapsed[::3] = max_step - 1  # a third is truncated by this step
    env.set_sim_state(_random_states(env_id, gen, n), elapsed)

    state, _, terminated, truncated, info = env.step(_random_actions(env, gen))
    final_state = info["final_state"]
    done = terminated | truncated
    assert truncated[::3].all() and done.any() and not done.all()

    # done: a fresh initial state, a zeroed step counter, and the last obs kept in the info
    assert _within_initial_bounds(env_id, env.sim_state[done]).all()
    torch.testing.assert_close(state[done], env._observe(env.sim_state)[done])
    assert not torch.equal(state[done], final_state[done])
    assert (env.elapsed[done] == 0).all()
    # not done: the episode goes on from where it is
    assert torch.equal(state[~done], final_state[~done])
    assert torch.equal(env.elapsed[~done], elapsed[~done] + 1)


def test_long_rollout_keeps_the_contract() -> None:
    """CartPole with random actions over more than one time limit: flags, counters, final_state."""
    gen = torch.Generator().manual_seed(3)
    env = TORCH_ENVS["CartPole-v1"](32, seed=1)
    state, _ = env.reset()
    num_done = torch.zeros((), dtype=torch.int64)
    for _ in range(520):
        prev_elapsed = env.elapsed.clone()
        state, _, terminated, truncated, info = env.step(torch.randint(0, 2, (32,), generator=gen))
        done = terminated | truncated
        assert torch.equal(truncated, prev_elapsed + 1 >= 500)
        assert torch.equal(state[~done], info["final_state"][~done])
        assert (env.elapsed <= 499).all()
        assert _within_initial_bounds("CartPole-v1", env.sim_state[done]).all()
        num_done += done.sum()
    assert num_done > 32  # random play ends many episodes (about 20 steps each)


def test_terminal_step_at_the_time_limit_is_terminated_and_truncated() -> None:
    """The time-limit rule shared with the multi-agent torch envs: `truncated` is set on the
    step that reaches max_step whether or not the episode also terminates there (gymnasium's
    `TimeLimit` does the same); agents let termination take precedence."""
    env = TORCH_ENVS["CartPole-v1"](4, seed=0)
    max_step = env.spec.max_step
    # sub-envs 0, 1: the cart beyond the track's edge (terminal); 2, 3: upright at the centre
    # sub-envs 0, 2: on the last allowed step; 1, 3: one step earlier
    state = torch.zeros((4, env.sim_dim))
    state[:2, 0] = 3.0
    env.set_sim_state(state, torch.tensor([max_step - 1, max_step - 2] * 2))
    _, _, terminated, truncated, info = env.step(torch.zeros(4, dtype=torch.int64))
    assert terminated.tolist() == [True, True, False, False]
    assert truncated.tolist() == [True, False, True, False]
    assert env.elapsed.tolist() == [0, 0, 0, max_step - 1]  # done: reset, whichever flag
    assert info["final_state"][0, 0] > 2.4  # the last state of the terminal episode


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_rollout(env_id: str) -> None:
    def rollout(seed: int) -> list[torch.Tensor]:
        env = TORCH_ENVS[env_id](16, seed=seed)
        gen = torch.Generator().manual_seed(0)
        state, _ = env.reset(seed=seed)
        out = [state]
        for _ in range(60):
            state, reward, terminated, truncated, _ = env.step(_random_actions(env, gen))
            out += [state, reward, terminated, truncated]
        return out

    first, again, other = rollout(11), rollout(11), rollout(12)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_state_dict_round_trip(env_id: str) -> None:
    gen = torch.Generator().manual_seed(0)
    env = TORCH_ENVS[env_id](16, seed=4)
    env.reset()
    for _ in range(30):
        env.step(_random_actions(env, gen))
    saved = env.state_dict()
    actions = [_random_actions(env, gen) for _ in range(40)]

    def continue_with(e: TorchVecEnv) -> list[torch.Tensor]:
        out = []
        for a in actions:
            state, reward, terminated, truncated, info = e.step(a)
            out += [state, reward, terminated, truncated, info["final_state"], e.elapsed]
        return out

    expected = continue_with(env)
    restored = TORCH_ENVS[env_id](16, seed=99)
    restored.load_state_dict(saved)
    got = continue_with(restored)
    assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spec_matches_gymnasium_registration(env_id: str) -> None:
    env = TORCH_ENVS[env_id](3)
    gym_spec = gymnasium.spec(env_id)
    gym_env = gymnasium.make(env_id)
    assert env.spec.name == env_id
    assert env.spec.max_step == gym_spec.max_episode_steps
    threshold = gym_spec.reward_threshold
    assert env.spec.target_return == (
        DEFAULT_TARGET_RETURNS[env_id] if threshold is None else threshold
    )
    assert env.spec.state_dim == gym_env.observation_space.shape[0]
    if env.spec.if_discrete:
        assert env.spec.action_dim == gym_env.action_space.n
    else:
        assert env.spec.action_dim == gym_env.action_space.shape[0]
        assert env.spec.action_low == tuple(gym_env.action_space.low.tolist())
        assert env.spec.action_high == tuple(gym_env.action_space.high.tolist())
    gym_env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_shapes_and_dtypes(env_id: str) -> None:
    n = 7
    env = TORCH_ENVS[env_id](n, seed=0)
    state_dim = env.spec.state_dim
    state, info = env.reset(seed=0)
    assert state.shape == (n, state_dim) and state.dtype == torch.float32
    assert info == {}
    assert env.sim_state.shape == (n, env.sim_dim) and env.sim_state.dtype == torch.float32

    action = _random_actions(env, torch.Generator().manual_seed(0))
    state, reward, terminated, truncated, info = env.step(action)
    assert state.shape == (n, state_dim) and state.dtype == torch.float32
    assert reward.shape == (n,) and reward.dtype == torch.float32
    assert terminated.shape == (n,) and terminated.dtype == torch.bool
    assert truncated.shape == (n,) and truncated.dtype == torch.bool
    final_state = info["final_state"]
    assert final_state.shape == (n, state_dim) and final_state.dtype == torch.float32
    assert env.elapsed.shape == (n,) and env.elapsed.dtype == torch.int64


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_observation_is_not_a_view_of_the_simulator(env_id: str) -> None:
    env = TORCH_ENVS[env_id](4, seed=0)
    state, _ = env.reset()
    before = env.sim_state.clone()
    state.add_(1.0)  # a caller normalizing in place must not move the simulator
    assert torch.equal(env.sim_state, before)


@pytest.mark.cuda
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_cuda_matches_cpu(env_id: str) -> None:
    gen = torch.Generator().manual_seed(0)
    states = _random_states(env_id, gen, 64)
    cpu, gpu = TORCH_ENVS[env_id](64), TORCH_ENVS[env_id](64, device="cuda")
    cpu.set_sim_state(states)
    gpu.set_sim_state(states)
    action = _random_actions(cpu, gen)
    _, r_cpu, term_cpu, _, info_cpu = cpu.step(action)
    _, r_gpu, term_gpu, _, info_gpu = gpu.step(action.cuda())
    torch.testing.assert_close(
        info_gpu["final_state"].cpu(), info_cpu["final_state"], atol=1e-4, rtol=1e-4
    )
    torch.testing.assert_close(r_gpu.cpu(), r_cpu, atol=1e-4, rtol=1e-5)
    assert torch.equal(term_gpu.cpu(), term_cpu)


def test_cartpole_without_velocities_is_cartpole_observed_in_part():
    """Same dynamics, rewards and limits as CartPole-v1 from the same seed; it observes the
    cart's position and the pole's angle only."""
    full, part = (
        TORCH_ENVS["CartPole-v1"](8, seed=3),
        TORCH_ENVS["CartPoleNoVelocity-v1"](8, seed=3),
    )
    assert part.spec.state_dim == 2 and part.spec.max_step == full.spec.max_step
    a, _ = full.reset(seed=3)
    b, _ = part.reset(seed=3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        action = torch.randint(2, (8,), generator=generator)
        torch.testing.assert_close(b, a[:, [0, 2]])
        a, ra, ta, ua, _ = full.step(action)
        b, rb, tb, ub, _ = part.step(action)
        assert torch.equal(ra, rb) and torch.equal(ta, tb) and torch.equal(ua, ub)


def test_pendulum_without_velocity_is_pendulum_observed_in_part():
    """Same dynamics, costs and limits as Pendulum-v1 from the same seed; it observes the
    angle's cosine and sine only."""
    full = TORCH_ENVS["Pendulum-v1"](8, seed=3)
    part = TORCH_ENVS["PendulumNoVelocity-v1"](8, seed=3)
    assert part.spec.state_dim == 2 and part.spec.max_step == full.spec.max_step == 200
    assert part.spec.target_return == full.spec.target_return
    a, _ = full.reset(seed=3)
    b, _ = part.reset(seed=3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        action = torch.rand((8, 1), generator=generator) * 2 - 1
        torch.testing.assert_close(b, a[:, :2])
        a, ra, ta, ua, _ = full.step(action)
        b, rb, tb, ub, _ = part.step(action)
        assert torch.equal(ra, rb) and torch.equal(ta, tb) and torch.equal(ua, ub)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "words"),
    [
        ("CartPole-v1", {"foo": 1}, ["takes no argument 'foo'", "It takes none"]),
        ("MinAtar/Breakout-v1", {"sticky_action_prb": 0.0},
         ["'sticky_action_prb'", "Did you mean 'sticky_action_prob'?", "difficulty_ramping"]),
    ],
)  # fmt: skip
def test_a_typo_in_the_env_kwargs_of_a_torch_native_env_is_named(env_id, kwargs, words):
    from xiaoyarl import EnvError, make_env

    with pytest.raises(EnvError) as caught:
        make_env(env_id, 2, env_kwargs=kwargs)
    for word in words:
        assert word in str(caught.value), str(caught.value)
