"""The torch-native multi-agent envs: the contract, the spread env against mpe2's own
`simple_spread_v3`, the two-step game's payoffs, and the registry.

The mpe2 comparison puts mpe2's world and the torch env into one simulator state, steps both
with the same actions for whole episodes and compares observations, rewards and flags. mpe2
computes in float64 and the torch env in float32; contact forces amplify rounding (an error in
a distance grows about twofold per step of contact), so the tight check re-synchronises the
torch env with mpe2's world before every step, and a free-running check allows 1e-4.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.envs.multi import (
    MULTI_AGENT_ENVS,
    MultiAgentVecEnv,
    SpreadContinuousEnv,
    SpreadDiscreteEnv,
    TorchMultiAgentVecEnv,
    TwoStepGameEnv,
    is_multi_agent,
    make_multi_agent_env,
    team_reward,
)
from xiaoyarl.errors import EnvError

ENV_IDS = list(MULTI_AGENT_ENVS)


def _random_actions(env: MultiAgentVecEnv, gen: torch.Generator) -> torch.Tensor:
    """Discrete `(n, A)` int64, or continuous `(n, A, action_dim)` a little beyond [-1, 1]."""
    spec = env.spec
    if spec.if_discrete:
        return torch.randint(0, spec.action_dim, (spec.num_envs, spec.num_agents), generator=gen)
    shape = (spec.num_envs, spec.num_agents, spec.action_dim)
    return torch.rand(shape, generator=gen) * 2.4 - 1.2


# --- the contract on every built-in env ---------------------------------------------------------
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_shapes_dtypes_and_spec(env_id: str) -> None:
    n = 5
    env = make_multi_agent_env(env_id, n, seed=0)
    spec = env.spec
    a, d, s = spec.num_agents, spec.obs_dim, spec.state_dim
    assert spec.name == env_id and spec.num_envs == n and len(spec.agent_names) == a
    obs, info = env.reset(seed=1)
    assert obs.shape == (n, a, d) and obs.dtype == torch.float32
    assert info["state"].shape == (n, s) and info["state"].dtype == torch.float32
    assert "avail_actions" not in info and not spec.has_action_mask

    obs, rewards, terminated, truncated, info = env.step(_random_actions(env, torch.Generator()))
    assert obs.shape == (n, a, d) and obs.dtype == torch.float32
    assert rewards.shape == (n, a) and rewards.dtype == torch.float32
    assert terminated.shape == (n,) and terminated.dtype == torch.bool
    assert truncated.shape == (n,) and truncated.dtype == torch.bool
    assert info["final_obs"].shape == (n, a, d) and info["final_obs"].dtype == torch.float32
    assert info["final_state"].shape == (n, s) and info["state"].shape == (n, s)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episodes_auto_reset_with_final_obs(env_id: str) -> None:
    n = 8
    env = make_multi_agent_env(env_id, n, seed=0)
    gen = torch.Generator().manual_seed(0)
    obs, info = env.reset()
    initial = env.state_dict()["sim_state"]
    max_step = env.spec.max_step
    for t in range(1, 2 * max_step + 1):
        prev_state = info["state"]
        obs, _, terminated, truncated, info = env.step(_random_actions(env, gen))
        done = terminated | truncated
        assert torch.equal(truncated, torch.full_like(truncated, t % max_step == 0))
        # where the episode goes on, final_obs/final_state are the returned obs/state
        assert torch.equal(info["final_obs"][~done], obs[~done])
        assert torch.equal(info["final_state"][~done], info["state"][~done])
        assert not torch.equal(info["final_state"], prev_state)  # the step did move something
        if t % max_step == 0:  # both envs end every episode after exactly max_step steps
            assert done.all() and (env.elapsed == 0).all()
            assert not torch.equal(info["final_obs"], obs)
            torch.testing.assert_close(obs, env._observe(env.sim_state))
            torch.testing.assert_close(info["state"], env._global_state(env.sim_state))
        else:
            assert not done.any()
    if env_id.startswith("Spread"):
        assert not torch.equal(env.sim_state, initial)  # the auto-reset drew new positions
        assert truncated.all() and not terminated.any()
    else:  # the two-step game terminates on its last allowed step: both flags (the shared rule)
        assert terminated.all() and truncated.all()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_state_dict_round_trip(env_id: str) -> None:
    gen = torch.Generator().manual_seed(0)
    env = make_multi_agent_env(env_id, 6, seed=4)
    env.reset()
    for _ in range(7):
        env.step(_random_actions(env, gen))
    saved = env.state_dict()
    actions = [_random_actions(env, gen) for _ in range(40)]

    def continue_with(e: MultiAgentVecEnv) -> list[torch.Tensor]:
        out = []
        for a in actions:
            obs, rewards, terminated, truncated, info = e.step(a)
            out += [obs, rewards, terminated, truncated, info["final_obs"], info["state"]]
        return out

    expected = continue_with(env)
    restored = make_multi_agent_env(env_id, 6, seed=99)
    restored.load_state_dict(saved)
    got = continue_with(restored)
    assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))


def test_same_seed_same_rollout() -> None:
    def rollout(seed: int) -> list[torch.Tensor]:
        env = SpreadContinuousEnv(4, seed=seed)
        gen = torch.Generator().manual_seed(0)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(30):  # crosses an auto-reset
            obs, rewards, _, _, _ = env.step(_random_actions(env, gen))
            out += [obs, rewards]
        return out

    first, again, other = rollout(11), rollout(11), rollout(12)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("env_id", ["SpreadDiscrete-v0", "SpreadContinuous-v0"])
def test_invalid_actions_raise(env_id: str) -> None:
    env = make_multi_agent_env(env_id, 3)
    env.reset()
    spec = env.spec
    good = _random_actions(env, torch.Generator())
    with pytest.raises(EnvError, match="shape"):
        env.step(good[:2])
    with pytest.raises(EnvError, match="shape"):
        env.step(good.unsqueeze(-1) if spec.if_discrete else good[..., :3])
    if spec.if_discrete:
        with pytest.raises(EnvError, match="int64"):
            env.step(good.to(torch.int32))
        bad = good.clone()
        bad[1, 2] = 5
        with pytest.raises(EnvError, match=r"sub-env 1, agent 2 \(agent_2\).*outside 0\.\.4"):
            env.step(bad)
    else:
        with pytest.raises(EnvError, match="float"):
            env.step(good.long())
    env.step(good)  # a good action still works after the refused ones


def test_team_reward_convention() -> None:
    rewards = torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]])
    spread = SpreadDiscreteEnv(2).spec
    shared = SpreadDiscreteEnv(2, local_ratio=0.0).spec
    assert not spread.shared_reward and shared.shared_reward
    torch.testing.assert_close(team_reward(spread, rewards), torch.tensor([6.0, 12.0]))
    torch.testing.assert_close(team_reward(shared, rewards), torch.tensor([1.0, 4.0]))
    assert TwoStepGameEnv(1).spec.shared_reward


# --- spread against mpe2 ------------------------------------------------------------------------
try:
    from mpe2 import simple_spread_v3
except ImportError:  # the 'multi' extra is not installed
    simple_spread_v3 = None
needs_mpe2 = pytest.mark.skipif(
    simple_spread_v3 is None, reason="needs mpe2 (pip install -e '.[multi]')"
)


def _world_state(penv) -> np.ndarray:
    """mpe2's simulator state in SpreadEnv's sim_state layout `(6N,)`."""
    world = penv.unwrapped.world
    agents = [a.state.p_pos for a in world.agents] + [a.state.p_vel for a in world.agents]
    return np.concatenate(agents + [lm.state.p_pos for lm in world.landmarks])


def _set_world_state(penv, sim: np.ndarray) -> None:
    world = penv.unwrapped.world
    n = len(world.agents)
    parts = sim.astype(np.float64).reshape(3, n, 2)
    for i, agent in enumerate(world.agents):
        agent.state.p_pos, agent.state.p_vel = parts[0, i].copy(), parts[1, i].copy()
    for i, landmark in enumerate(world.landmarks):
        landmark.state.p_pos = parts[2, i].copy()


def _mpe2_actions(env: SpreadDiscreteEnv, actions: torch.Tensor, names: list[str]) -> list[dict]:
    """Per sub-env action dicts for mpe2: ints, or the [-1, 1] rows mapped to its [0, 1]."""
    if env.spec.if_discrete:
        return [{name: int(row[j]) for j, name in enumerate(names)} for row in actions]
    a01 = ((actions.clamp(-1, 1) + 1.0) * 0.5).numpy()
    return [{name: row[j] for j, name in enumerate(names)} for row in a01]


def _stacked(d: dict, names: list[str], dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(np.stack([np.asarray(d[name]) for name in names]), dtype=dtype)


def _crowded(gen: torch.Generator, num_envs: int, num_agents: int) -> torch.Tensor:
    """Simulator states with the agents packed together and moving: many contacts."""
    pos = torch.rand((num_envs, num_agents, 2), generator=gen) * 0.7 - 0.35
    vel = torch.rand((num_envs, num_agents, 2), generator=gen) * 2.0 - 1.0
    landmarks = torch.rand((num_envs, num_agents, 2), generator=gen) * 2.0 - 1.0
    return torch.cat([pos, vel, landmarks], dim=1).flatten(1)


@needs_mpe2
@pytest.mark.parametrize("num_agents", [3, 4])
@pytest.mark.parametrize("continuous", [False, True])
def test_spread_matches_mpe2_transition_by_transition(continuous: bool, num_agents: int) -> None:
    n = 12 if num_agents == 3 else 4
    cls = SpreadContinuousEnv if continuous else SpreadDiscreteEnv
    env = cls(n, seed=0, num_agents=num_agents)
    gen = torch.Generator().manual_seed(5 + num_agents)
    penvs = [
        simple_spread_v3.parallel_env(N=num_agents, continuous_actions=continuous) for _ in range(n)
    ]
    names = list(penvs[0].possible_agents)
    assert names == list(env.spec.agent_names)
    for i, penv in enumerate(penvs):
        penv.reset(seed=i)
    start = _crowded(gen, n, num_agents)
    start[n // 2 :] = torch.tensor(np.stack([_world_state(p) for p in penvs[n // 2 :]]))
    for penv, sim in zip(penvs, start.numpy(), strict=True):
        _set_world_state(penv, sim)
    env.set_sim_state(start)
    first_obs = [{a: p.unwrapped.observe(a) for a in names} for p in penvs]
    expected_first = torch.stack([_stacked(o, names) for o in first_obs])
    torch.testing.assert_close(env._observe(env.sim_state), expected_first, atol=1e-6, rtol=0)

    collisions = 0
    for t in range(env.spec.max_step):
        actions = _random_actions(env, gen)
        _, rewards, terminated, truncated, info = env.step(actions)
        results = [
            p.step(a) for p, a in zip(penvs, _mpe2_actions(env, actions, names), strict=True)
        ]
        m_obs = torch.stack([_stacked(r[0], names) for r in results])
        m_rew = torch.stack([_stacked(r[1], names) for r in results])
        m_term = torch.tensor([r[2][names[0]] for r in results])
        m_trunc = torch.tensor([r[3][names[0]] for r in results])
        torch.testing.assert_close(info["final_obs"], m_obs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(rewards, m_rew, atol=1e-5, rtol=1e-5)
        assert torch.equal(terminated, m_term) and torch.equal(truncated, m_trunc)
        assert truncated.all() == (t == env.spec.max_step - 1)
        collisions += int((m_rew != m_rew.amax(1, keepdim=True)).any(1).sum())
        if t < env.spec.max_step - 1:  # re-synchronise: the next transition starts equal
            sim = torch.tensor(np.stack([_world_state(p) for p in penvs]), dtype=torch.float32)
            env.set_sim_state(sim, env.elapsed)
    assert not penvs[0].agents  # mpe2 ended its episodes too
    assert collisions >= n  # the collision penalty and contact forces were exercised


@needs_mpe2
@pytest.mark.parametrize("continuous", [False, True])
def test_spread_free_run_matches_mpe2(continuous: bool) -> None:
    n = 8
    cls = SpreadContinuousEnv if continuous else SpreadDiscreteEnv
    env = cls(n, seed=0)
    penvs = [simple_spread_v3.parallel_env(continuous_actions=continuous) for _ in range(n)]
    names = list(penvs[0].possible_agents)
    first = [p.reset(seed=100 + i)[0] for i, p in enumerate(penvs)]
    env.set_sim_state(torch.tensor(np.stack([_world_state(p) for p in penvs])))
    expected_first = torch.stack([_stacked(o, names) for o in first])
    torch.testing.assert_close(env._observe(env.sim_state), expected_first, atol=1e-6, rtol=0)
    gen = torch.Generator().manual_seed(1)
    team_return = torch.zeros(n)
    for _ in range(env.spec.max_step):
        actions = _random_actions(env, gen)
        _, rewards, _, truncated, info = env.step(actions)
        results = [
            p.step(a) for p, a in zip(penvs, _mpe2_actions(env, actions, names), strict=True)
        ]
        m_obs = torch.stack([_stacked(r[0], names) for r in results])
        m_rew = torch.stack([_stacked(r[1], names) for r in results])
        torch.testing.assert_close(info["final_obs"], m_obs, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(rewards, m_rew, atol=1e-4, rtol=1e-4)
        team_return += team_reward(env.spec, rewards)
    assert truncated.all()
    assert (team_return < 0).all()  # distances are paid every step


@needs_mpe2
def test_spread_spec_matches_mpe2() -> None:
    for continuous, cls in [(False, SpreadDiscreteEnv), (True, SpreadContinuousEnv)]:
        env = cls(2, num_agents=4, max_cycles=30)
        penv = simple_spread_v3.parallel_env(N=4, max_cycles=30, continuous_actions=continuous)
        penv.reset(seed=0)
        space = penv.action_space("agent_0")
        assert env.spec.obs_dim == penv.observation_space("agent_0").shape[0] == 24
        assert env.spec.max_step == penv.unwrapped.max_cycles == 30
        assert env.spec.num_agents == len(penv.possible_agents) == 4
        if continuous:
            assert env.spec.action_dim == space.shape[0]
            assert env.spec.action_low == tuple(space.low.tolist())
            assert env.spec.action_high == tuple(space.high.tolist())
        else:
            assert env.spec.action_dim == space.n
        assert env.spec.state_dim == 6 * 4  # positions, velocities, landmarks


@needs_mpe2
def test_spread_terminate_on_success_like_mpe2() -> None:
    # agents sitting still on their landmarks: success; at the time limit mpe2 truncates instead
    env = SpreadDiscreteEnv(2, terminate_on_success=True)
    penv = simple_spread_v3.parallel_env(terminate_on_success=True)
    penv.reset(seed=0)
    pos = torch.tensor([[-0.5, 0.5], [0.5, 0.5], [0.0, -0.5]])
    sim = torch.cat([pos, torch.zeros(3, 2), pos + 0.01]).flatten()
    env.set_sim_state(sim.expand(2, -1), torch.tensor([0, 24]))
    _, _, terminated, truncated, _ = env.step(torch.zeros((2, 3), dtype=torch.int64))
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, True]
    _set_world_state(penv, sim.numpy())
    _, _, m_term, m_trunc, _ = penv.step({name: 0 for name in penv.possible_agents})
    assert all(m_term.values()) and not any(m_trunc.values())


def test_spread_initial_distribution() -> None:
    env = SpreadDiscreteEnv(4096, seed=0)
    env.reset(seed=3)
    pos, vel, landmarks = env._split(env.sim_state)
    positions = torch.cat([pos, landmarks], dim=1)
    assert (positions >= -1).all() and (positions < 1).all() and (vel == 0).all()
    assert positions.min() < -0.999 and positions.max() > 0.999
    assert abs(float(positions.mean())) < 0.02  # uniform, centred
    assert not torch.equal(pos[:, 0], landmarks[:, 0])  # drawn independently


# --- the two-step game --------------------------------------------------------------------------
def test_two_step_payoffs_of_every_joint_action_sequence() -> None:
    sequences = list(itertools.product(range(2), repeat=4))  # (a1, a2) at step 1, then step 2
    env = TwoStepGameEnv(len(sequences))
    obs, info = env.reset()
    start = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert (obs == start).all() and (info["state"] == start).all()
    seq = torch.tensor(sequences)  # (16, 4)
    obs, r1, term1, trunc1, info = env.step(seq[:, :2].contiguous())
    assert (r1 == 0).all() and not (term1 | trunc1).any()
    # agent 1's first action picks the game: 0 -> 2A, 1 -> 2B; agent 2's has no effect
    expected_game = torch.where(seq[:, 0] == 0, 1, 2)
    assert torch.equal(obs.argmax(-1), expected_game.unsqueeze(1).expand(-1, 2))
    assert torch.equal(obs[:, 0], info["state"]) and torch.equal(obs[:, 0], obs[:, 1])

    obs, r2, term2, trunc2, info = env.step(seq[:, 2:].contiguous())
    assert term2.all() and trunc2.all()  # terminal at the time limit (max_step = 2)
    payoff_2b = [[0.0, 1.0], [1.0, 8.0]]
    for k, (a1, _, b1, b2) in enumerate(sequences):
        expected = 7.0 if a1 == 0 else payoff_2b[b1][b2]
        assert r2[k].tolist() == [expected, expected]
    assert (info["final_obs"].argmax(-1) == 3).all()  # the end state
    assert (obs == start).all()  # auto-reset to state 1
    team_returns = team_reward(env.spec, r1) + team_reward(env.spec, r2)
    assert team_returns.max() == 8.0 == env.spec.target_return
    assert team_returns.mean() == 4.75  # a uniformly random joint policy
    assert sequences[int(team_returns.argmax())][::2] == (1, 1)  # 2B, then both B


# --- the time limit: one rule with the single-agent torch envs ----------------------------------
def test_terminal_step_at_the_time_limit_is_terminated_and_truncated() -> None:
    """The single-agent rule (`truncated = elapsed >= max_step`, whether terminal or not)
    holds for the multi-agent torch envs too, as they share `TorchVecEnv`'s step."""
    assert issubclass(TorchMultiAgentVecEnv, TorchVecEnv)
    env = SpreadDiscreteEnv(4, seed=0, terminate_on_success=True)
    env.reset()
    max_step = env.spec.max_step
    # sub-envs 0, 1: every agent on its landmark (terminal); 2, 3: far from them (not terminal)
    # sub-envs 0, 2: on the last allowed step; 1, 3: one step earlier
    state = env.state_dict()["sim_state"].clone()  # positions (2N), velocities, landmarks
    n = env.num_agents
    landmarks = state[:, 4 * n :]
    on_landmarks = torch.tensor([True, True, False, False]).unsqueeze(1)
    state[:, : 2 * n] = torch.where(on_landmarks, landmarks, landmarks + 5.0)
    state[:, 2 * n : 4 * n] = 0.0
    env.set_sim_state(state, torch.tensor([max_step - 1, max_step - 2] * 2))
    _, _, terminated, truncated, _ = env.step(torch.zeros((4, n), dtype=torch.int64))
    # mpe2 checks the time limit first: spread does not terminate on its last allowed step
    assert terminated.tolist() == [False, True, False, False]
    assert truncated.tolist() == [True, False, True, False]

    game = TwoStepGameEnv(3)  # terminal on its second step, which is also the last allowed one
    game.reset()
    _, _, terminated, truncated, _ = game.step(torch.zeros((3, 2), dtype=torch.int64))
    assert not (terminated | truncated).any()
    _, _, terminated, truncated, info = game.step(torch.ones((3, 2), dtype=torch.int64))
    assert terminated.all() and truncated.all()  # both, as the single-agent envs report
    assert (game.elapsed == 0).all() and (info["final_obs"].argmax(-1) == 3).all()


# --- registry -----------------------------------------------------------------------------------
def test_registry_and_factory() -> None:
    assert all(is_multi_agent(env_id) for env_id in ENV_IDS)
    assert is_multi_agent("mpe2:simple_spread_v3")
    assert is_multi_agent("pettingzoo.butterfly:pistonball_v6")
    assert not is_multi_agent("CartPole-v1")
    assert not is_multi_agent("my_module:MyEnv-v0")  # a gymnasium id
    env = make_multi_agent_env("SpreadDiscrete-v0", 3, seed=1, env_kwargs={"num_agents": 5})
    assert env.spec.num_agents == 5 and env.spec.obs_dim == 30
    with env:
        env.reset()
    with pytest.raises(EnvError, match="SpreadDiscrete-v0, SpreadContinuous-v0"):
        make_multi_agent_env("Nope-v0")
    with pytest.raises(EnvError, match="make_env"):
        make_multi_agent_env("my_module:MyEnv-v0")
    with pytest.raises(EnvError, match="env_kwargs"):
        make_multi_agent_env("TwoStepGame-v0", env_kwargs={"num_agents": 3})
    with pytest.raises(EnvError, match="local_ratio"):
        make_multi_agent_env("SpreadContinuous-v0", env_kwargs={"local_ratio": 2.0})


@pytest.mark.cuda
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_cuda_matches_cpu(env_id: str) -> None:
    cpu = make_multi_agent_env(env_id, 64, seed=0)
    gpu = make_multi_agent_env(env_id, 64, device="cuda", seed=0, env_kwargs={})
    gpu.set_sim_state(cpu.sim_state)
    gen = torch.Generator().manual_seed(0)
    for _ in range(cpu.spec.max_step):
        actions = _random_actions(cpu, gen)
        _, r_cpu, term_cpu, trunc_cpu, info_cpu = cpu.step(actions)
        _, r_gpu, term_gpu, trunc_gpu, info_gpu = gpu.step(actions.cuda())
        final_gpu = info_gpu["final_obs"].cpu()
        torch.testing.assert_close(final_gpu, info_cpu["final_obs"], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(r_gpu.cpu(), r_cpu, atol=1e-4, rtol=1e-4)
        assert torch.equal(term_gpu.cpu(), term_cpu) and torch.equal(trunc_gpu.cpu(), trunc_cpu)
