"""PPO / A2C: GAE and objectives against slow references, shapes and dtypes, bootstrapping."""

import math

import pytest
import torch

from xiaoyarl import Config, make_env
from xiaoyarl.agents import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO
from xiaoyarl.agents.ppo import Rollout
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.returns import compute_gae


def gae_reference(rewards, values, next_values, terminals, truncates, gamma, lam):
    """GAE the slow, obvious way: per env, backwards, with Python floats."""
    T, N = len(rewards), len(rewards[0])
    adv = [[0.0] * N for _ in range(T)]
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminals[t][n] else gamma * next_values[t][n]
            delta = rewards[t][n] + bootstrap - values[t][n]
            episode_goes_on = not (terminals[t][n] or truncates[t][n])
            running = delta + (gamma * lam * running if episode_goes_on else 0.0)
            adv[n and t or t][n] = running
    return torch.tensor(adv)


@pytest.mark.parametrize("case", ["mixed", "truncation_only"])
def test_gae_matches_slow_reference(case):
    g = torch.Generator().manual_seed(0)
    T, N = 40, 7
    rewards = torch.randn(T, N, generator=g)
    values = torch.randn(T, N, generator=g)
    next_values = torch.randn(T, N, generator=g)
    if case == "mixed":
        terminals = torch.rand(T, N, generator=g) < 0.1
        truncates = (torch.rand(T, N, generator=g) < 0.1) & ~terminals
    else:  # an infinite-horizon env: episodes only end by the time limit
        terminals = torch.zeros(T, N, dtype=torch.bool)
        truncates = torch.zeros(T, N, dtype=torch.bool)
        truncates[9::10] = True
    got = compute_gae(rewards, values, next_values, terminals, truncates, 0.97, 0.9)
    want = gae_reference(
        rewards.tolist(), values.tolist(), next_values.tolist(),
        terminals.tolist(), truncates.tolist(), 0.97, 0.9,
    )  # fmt: skip
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_gae_truncation_bootstraps_but_termination_does_not():
    rewards = torch.ones(1, 2)
    values = torch.zeros(1, 2)
    next_values = torch.full((1, 2), 10.0)
    terminals = torch.tensor([[True, False]])
    truncates = torch.tensor([[False, True]])
    adv = compute_gae(rewards, values, next_values, terminals, truncates, 0.9, 0.95)
    assert adv[0, 0] == pytest.approx(1.0)  # terminal: r only
    assert adv[0, 1] == pytest.approx(1.0 + 0.9 * 10.0)  # truncated: r + gamma * V(last state)


def _agent(cls, env_id, num_envs=4, **overrides):
    config = Config(algo="a2c" if "A2C" in cls.__name__ else "ppo", env_id=env_id, **overrides)
    config = resolve_config(config, batched=True)
    env = make_env(env_id, num_envs, seed=0)
    config.num_envs = num_envs
    agent = cls(env.spec, config, torch.device("cpu"))
    agent.last_state, _ = env.reset(seed=0)
    return agent, env


def test_clipped_objective_equals_textbook_form():
    agent, _ = _agent(AgentPPO, "Pendulum-v1")
    eps = agent.config.ratio_clip
    ratio = torch.linspace(0.5, 1.5, 101).repeat(2)
    adv = torch.cat([torch.full((101,), 2.0), torch.full((101,), -3.0)])
    got = agent.actor_objective(ratio, adv, torch.zeros_like(ratio))
    for r, a, o in zip(ratio.tolist(), adv.tolist(), got.tolist(), strict=True):
        clipped = min(max(r, 1 - eps), 1 + eps)
        assert o == pytest.approx(min(r * a, clipped * a), abs=1e-6)


def test_a2c_objective_is_logprob_times_advantage():
    agent, _ = _agent(AgentA2C, "Pendulum-v1")
    logp = torch.tensor([-1.0, -2.0])
    adv = torch.tensor([0.5, -1.5])
    got = agent.actor_objective(torch.ones(2), adv, logp)
    torch.testing.assert_close(got, torch.tensor([-0.5, 3.0]))


@pytest.mark.parametrize(
    ("cls", "env_id"),
    [
        (AgentPPO, "Pendulum-v1"),
        (AgentDiscretePPO, "CartPole-v1"),
        (AgentA2C, "MountainCarContinuous-v0"),
        (AgentDiscreteA2C, "Acrobot-v1"),
    ],
)
def test_explore_and_update_shapes_and_dtypes(cls, env_id):
    agent, env = _agent(cls, env_id, num_envs=4, horizon_len=8, batch_size=8, repeat_times=2.0)
    rollout = agent.explore_env(env, 8)
    assert isinstance(rollout, Rollout)
    s, a = env.spec.state_dim, env.spec.action_dim
    assert rollout.states.shape == (8, 4, s) and rollout.states.dtype == torch.float32
    assert rollout.next_states.shape == (8, 4, s)
    if env.spec.if_discrete:
        assert rollout.actions.shape == (8, 4) and rollout.actions.dtype == torch.int64
        assert ((rollout.actions >= 0) & (rollout.actions < a)).all()
    else:
        assert rollout.actions.shape == (8, 4, a) and rollout.actions.dtype == torch.float32
    for name in ("logprobs", "rewards"):
        assert getattr(rollout, name).shape == (8, 4)
    assert rollout.terminals.dtype == torch.bool and rollout.truncates.shape == (8, 4)
    assert agent.last_state.shape == (4, s)

    before = [p.clone() for p in agent.actor.parameters()]
    logs = agent.update_net(rollout)
    assert set(logs) == {"actor_loss", "critic_loss", "entropy", "approx_kl", "clip_fraction"}
    assert all(v.dim() == 0 and math.isfinite(v.item()) for v in logs.values())
    after = list(agent.actor.parameters())
    assert any(not torch.equal(b, p) for b, p in zip(before, after, strict=True))
    action = agent.act(agent.last_state)
    assert action.shape == ((4,) if env.spec.if_discrete else (4, a))


def test_rollout_keeps_last_state_of_truncated_episode():
    """Pendulum only ends by its time limit: at the cut, next_states holds the true last state,
    not the reset state that follows, so the critic bootstraps from the right value."""
    agent, env = _agent(AgentPPO, "Pendulum-v1", num_envs=3)
    env.elapsed.fill_(env.spec.max_step - 2)  # the cut comes on the second step
    rollout = agent.explore_env(env, 4)
    assert not rollout.terminals.any()
    assert rollout.truncates[1].all() and not rollout.truncates[[0, 2, 3]].any()
    # within an episode the next state is the following state ...
    torch.testing.assert_close(rollout.next_states[0], rollout.states[1])
    # ... but at the cut it is the episode's last state, and the next row starts afresh
    assert not torch.allclose(rollout.next_states[1], rollout.states[2])
    last_theta_dot = rollout.next_states[1][:, 2]
    prev_theta_dot = rollout.states[1][:, 2]
    assert (last_theta_dot - prev_theta_dot).abs().max() < 2.0  # continuous motion, not a reset
