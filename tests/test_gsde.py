"""SAC with generalized state-dependent exploration (`explore_noise: gsde`, `ActorGSDE`): its
distribution and log-probability against references written out, one exploration matrix per
sub-env for a whole rollout, the fixed temperature (`alpha_auto: false`), the refusals, and a
saved policy; its learning test is in test_learning.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.distributions import Normal

from xiaoyarl import Config, ConfigError, load_policy
from xiaoyarl.agents import AgentSAC
from xiaoyarl.agents.settings import check_config
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.core.off_policy_nets import ActorGSDE
from xiaoyarl.train.checkpoint import load_plain


def make_sac(make_agent, **overrides):
    """The small off-policy SAC (`make_agent`) on 4 torch-native Pendulums, exploring with gSDE."""
    return make_agent(AgentSAC, explore_noise="gsde", **overrides)


def test_the_noise_is_linear_in_the_features_with_the_state_dependent_variance():
    """u = mu(s) + z(s) E, E ~ N(0, sigma^2) entrywise: over many matrices, u's mean is mu(s)
    and its std sqrt(sum_j z_j(s)^2 sigma_jk^2), per state and action."""
    torch.manual_seed(0)
    actor = ActorGSDE(3, 2, [16, 16], RunningNorm(3, enabled=False))
    with torch.no_grad():
        actor.log_std.uniform_(-2.0, 0.0)  # a different sigma for every feature and action
        states = torch.randn(5, 3)
        features, mean = actor.features_mean(states)
        matrices = actor.draw_exploration(40_000)  # (n, F, A)
        u = mean + torch.einsum("bf,nfa->nba", features, matrices)  # (n, B, A)
    want_std = (features.square() @ actor.log_std.exp().square()).sqrt()
    torch.testing.assert_close(u.mean(0), mean, atol=4 * want_std.max().item() / 200, rtol=0)
    torch.testing.assert_close(u.std(0), want_std, rtol=0.03, atol=1e-4)
    assert (mean.abs() <= ActorGSDE.mean_clip).all() and features.min() >= 0  # ReLU features
    # exploring with each sub-env's own matrix: tanh of the same sum
    explored = actor.explore(states, matrices[:5])
    torch.testing.assert_close(explored, (mean + (features.unsqueeze(1) @ matrices[:5])
                                          .squeeze(1)).tanh())  # fmt: skip


def test_the_log_probability_matches_a_reference_written_out():
    """log pi(a|s) of a reparameterised sample: Normal(mu, sqrt(sigma(s)^2 + 1e-6)) of u, minus
    log(1 - tanh(u)^2), summed over actions; `logprob` of the same action agrees; the gradient
    reaches log_std (through the matrix and sigma(s))."""
    torch.manual_seed(0)
    actor = ActorGSDE(3, 2, [16, 16], RunningNorm(3, enabled=False))
    states = torch.randn(7, 3)
    torch.manual_seed(5)
    action, logprob = actor.get_action_logprob(states)
    torch.manual_seed(5)
    hidden = actor.body(states)
    mean = actor.mean(hidden).clamp(-2, 2)
    std = actor.log_std.exp()
    u = mean + hidden @ (std * torch.randn_like(std))
    sigma = (hidden.square() @ std.square() + 1e-6).sqrt()
    want = (Normal(mean, sigma).log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    torch.testing.assert_close(action, torch.tanh(u))
    torch.testing.assert_close(logprob, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(actor.logprob(states, action.detach()), logprob,
                               rtol=1e-3, atol=1e-3)  # fmt: skip
    logprob.sum().backward()
    assert actor.log_std.grad is not None and actor.log_std.grad.abs().sum() > 0


def test_each_sub_env_keeps_its_matrix_for_the_rollout(make_agent):
    """Exploring draws one matrix per sub-env as each rollout starts: within a rollout the
    same state gives the same action, the sub-envs' matrices differ, a new rollout draws anew;
    the deterministic policy is tanh(mu)."""
    agent, env = make_sac(make_agent, learning_starts=0)
    agent.explore_env(env, 3)
    first = agent.sde_matrices.clone()
    assert first.shape == (4, 32, 1) and not torch.equal(first[0], first[1])
    state = torch.randn(4, 3)
    torch.testing.assert_close(agent.explore_action(state), agent.explore_action(state))
    agent.explore_env(env, 3)
    assert not torch.equal(agent.sde_matrices, first)
    _, mean = agent.actor.features_mean(state)
    torch.testing.assert_close(agent.act(state), mean.tanh())


def test_a_fixed_temperature_stays_at_alpha_init(make_agent):
    agent, env = make_sac(make_agent, alpha_auto=False, alpha_init=0.1)
    for _ in range(4):
        logs = agent.update_net(agent.explore_env(env, 8))
    assert agent.temperature().item() == pytest.approx(0.1)
    assert logs["alpha"].item() == pytest.approx(0.1) and "entropy" in logs
    learned, env = make_sac(make_agent)
    for _ in range(4):
        learned.update_net(learned.explore_env(env, 8))
    assert learned.temperature().item() != pytest.approx(1.0)  # the default learns alpha


def test_gsde_is_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="gsde"):
        check_config(Config(algo="td3", env_id="Pendulum-v1", explore_noise="gsde"))
    with pytest.raises(ConfigError, match="ou"):
        check_config(Config(algo="sac", env_id="Pendulum-v1", explore_noise="ou"))
    check_config(Config(algo="redq", env_id="Pendulum-v1", explore_noise="gsde"))


def test_trains_through_the_cli_and_saves_a_policy_that_acts_as_the_agent(
    tmp_path, cli, make_agent
):
    summary = tmp_path / "summary.json"
    done = cli("train", "sac", "Pendulum-v1", "--no-preset", "--quiet", "--max-steps", "600",
               "--eval-every", "300", "--eval-episodes", "2", "--set", "explore_noise=gsde",
               "--set", "net_dims=[32,32]", "--set", "learning_starts=200", "--cwd",
               str(tmp_path / "r"), "--summary-json", str(summary))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(summary.read_text())["total_steps"] >= 600
    saved = load_plain(tmp_path / "r" / "actor.pt")
    assert saved["actor_class"] == "ActorGSDE"
    agent, _ = make_sac(make_agent)
    agent.actor.load_state_dict(saved["actor"])
    policy = load_policy(tmp_path / "r")
    obs = torch.randn(5, 3)
    low, high = -2.0, 2.0  # Pendulum's torque bounds
    np.testing.assert_allclose(policy.predict(obs.numpy()),
                               low + (agent.act(obs).numpy() + 1) / 2 * (high - low),
                               atol=1e-5)  # fmt: skip
