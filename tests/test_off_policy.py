"""Off-policy agents: targets against references written the obvious way, shapes, bad input."""

import math

import pytest
import torch
from torch import nn
from torch.distributions import Normal

from xiaoyarl import ConfigError, make_env
from xiaoyarl.agents import (
    AgentD3QN,
    AgentDoubleDQN,
    AgentDQN,
    AgentModSAC,
    AgentREDQ,
    AgentSAC,
    AgentSACDiscrete,
    AgentTD3,
)
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.core.off_policy_nets import CriticEnsemble
from xiaoyarl.run import agent_class
from xiaoyarl.train.checkpoint import load_plain


def test_explore_and_update_shapes(off_policy_cls, make_agent):
    agent, env = make_agent(off_policy_cls, learning_starts=40)
    for _ in range(3):  # 3 rollouts x 8 steps x 4 envs; learning starts after the first
        rollout = agent.explore_env(env, 8)
        logs = agent.update_net(rollout)
    s = env.spec
    assert rollout.states.shape == (8, 4, s.state_dim)
    assert rollout.next_states.shape == (8, 4, s.state_dim)
    if s.if_discrete:
        assert rollout.actions.shape == (8, 4) and rollout.actions.dtype == torch.int64
    else:
        assert rollout.actions.shape == (8, 4, s.action_dim)
        assert rollout.actions.abs().max() <= 1.0
    assert rollout.rewards.shape == rollout.terminals.shape == rollout.truncates.shape == (8, 4)
    assert agent.explored == 96 and len(agent.buffer) > 0
    assert agent.updates == 2 * 32 * agent.config.replay_ratio  # two rollouts after warm-up
    assert "critic_loss" in logs and all(math.isfinite(v.item()) for v in logs.values())
    action = agent.act(agent.last_state)
    assert action.shape == ((4,) if s.if_discrete else (4, s.action_dim))


def test_dqn_target_is_max_of_target_network(batch_for, make_agent):
    agent, _ = make_agent(AgentDQN)
    b = batch_for(agent)
    want = [max(agent.qnet_target.q_values(ns[None])[0].tolist()) for ns in b.next_states]
    torch.testing.assert_close(agent.next_q(b.next_states), torch.tensor(want))


def test_double_dqn_online_net_selects_target_net_evaluates(batch_for, make_agent):
    for cls in (AgentDoubleDQN, AgentD3QN):
        agent, _ = make_agent(cls)
        b = batch_for(agent)
        with torch.no_grad():  # make the two networks disagree
            for p in agent.qnet_target.parameters():
                p.add_(torch.randn_like(p))
        want = []
        for ns in b.next_states:
            online = agent.qnet.q_values(ns[None])[0]
            target = agent.qnet_target.q_values(ns[None])[0]
            want.append(target[int(online.argmax())].item())
        torch.testing.assert_close(agent.next_q(b.next_states), torch.tensor(want))


def test_dueling_q_is_value_plus_centred_advantage(make_agent):
    agent, _ = make_agent(AgentD3QN)
    s = torch.randn(5, 4)
    net = agent.qnet
    hidden = net.net(s)
    adv = net.advantage_head(hidden)
    want = net.value_head(hidden) + adv - adv.mean(-1, keepdim=True)
    torch.testing.assert_close(net.q_values(s), want)


def test_td3_target_noise_is_clipped_and_actor_update_delayed(batch_for, make_agent):
    agent, _ = make_agent(AgentTD3, policy_noise_std=1e6, policy_noise_clip=0.3)
    s = torch.randn(2000, 3)
    base = agent.actor_target(s)
    smoothed = agent.target_action(s)
    noise = smoothed - base
    inside = (base + 0.3 <= 1) & (base - 0.3 >= -1)  # where the final clamp to [-1, 1] is idle
    assert (noise.abs() <= 0.3 + 1e-6).all() and smoothed.abs().max() <= 1.0
    clipped = noise[inside].abs()  # huge noise: always clipped
    torch.testing.assert_close(clipped, torch.full_like(clipped, 0.3), atol=1e-5, rtol=0)

    agent.updates = 0
    changed = []
    for _ in range(4):
        before = [p.clone() for p in agent.actor.parameters()]
        agent.update_step(batch_for(agent))
        agent.updates += 1
        after = agent.actor.parameters()
        changed.append(any(not torch.equal(a, b) for a, b in zip(before, after, strict=True)))
    assert changed == [True, False, True, False]  # policy_delay = 2


def test_td3_target_is_min_of_two_critics(batch_for, make_agent, next_value):
    agent, _ = make_agent(AgentTD3, policy_noise_std=0.0)
    b = batch_for(agent)
    q = agent.critic_target(b.next_states, agent.actor_target(b.next_states))
    assert q.shape == (2, 6)
    torch.testing.assert_close(next_value(agent, b), torch.minimum(q[0], q[1]))


def test_sac_soft_target_with_entropy_and_target_entropy(batch_for, make_agent, next_value):
    agent, _ = make_agent(AgentSAC)
    assert agent.target_entropy == -1.0  # -action_dim
    b = batch_for(agent)
    torch.manual_seed(3)
    got = next_value(agent, b)
    torch.manual_seed(3)
    action, logprob = agent.actor.get_action_logprob(b.next_states)
    q = agent.critic_target(b.next_states, action)
    want = torch.minimum(q[0], q[1]) - agent.temperature() * logprob
    torch.testing.assert_close(got, want)


def test_sac_squashed_gaussian_logprob_matches_change_of_variables(make_agent):
    agent, _ = make_agent(AgentSAC)
    s = torch.randn(7, 3)
    torch.manual_seed(5)
    action, logprob = agent.actor.get_action_logprob(s)
    torch.manual_seed(5)
    mean, log_std = agent.actor.net(s).chunk(2, -1)
    std = log_std.clamp(-20, 2).exp()
    u = mean + std * torch.randn_like(mean)
    want = (Normal(mean, std).log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    torch.testing.assert_close(action, torch.tanh(u))
    torch.testing.assert_close(logprob, want, rtol=1e-4, atol=1e-4)


def test_sac_temperature_rises_when_entropy_is_below_target(make_agent):
    agent, _ = make_agent(AgentSAC)
    before = agent.temperature().item()
    losses, _ = agent.temperature_losses(torch.full((8,), 5.0))  # entropy -5 < target -1
    agent.optimizer_step(agent.optimizers["temperature"], agent.temperature, losses["temperature"])
    assert agent.temperature().item() > before


def test_redq_target_is_min_over_random_subset_of_ensemble(make_agent):
    agent, _ = make_agent(AgentREDQ)
    assert agent.critic.num == 10 and agent.config.redq_subset == 2
    q = torch.randn(10, 6)
    torch.manual_seed(9)
    got = agent.reduce_target_q(q)
    torch.manual_seed(9)
    subset = torch.randperm(10)[:2].tolist()
    want = [min(q[i, j].item() for i in subset) for j in range(6)]
    torch.testing.assert_close(got, torch.tensor(want))
    torch.testing.assert_close(agent.reduce_actor_q(q), q.mean(0))


def test_critic_ensemble_one_call_equals_each_member_alone():
    critic = CriticEnsemble(3, 1, [16, 16], RunningNorm(3, enabled=False), num=10)
    s, a = torch.randn(5, 3), torch.randn(5, 1)
    together = critic(s, a)
    x = torch.cat([s, a], -1)
    for i in range(10):
        h = x
        for layer in critic.net:
            if hasattr(layer, "weight"):
                h = h @ layer.weight[i] + layer.bias[i, 0]
            else:
                h = torch.relu(h)
        torch.testing.assert_close(together[i], h.squeeze(-1))


def test_sac_discrete_value_is_expectation_over_policy(batch_for, make_agent, next_value):
    agent, _ = make_agent(AgentSACDiscrete)
    b = batch_for(agent)
    probs, logp = agent.actor.probs_logprobs(b.next_states)
    q = agent.critic_target(b.next_states).min(0).values
    alpha = agent.temperature()
    want = torch.tensor([
        sum(probs[i, a] * (q[i, a] - alpha * logp[i, a]) for a in range(2)).item()
        for i in range(6)
    ])  # fmt: skip
    torch.testing.assert_close(next_value(agent, b), want)
    q_taken = agent.critic_q(b.states, b.actions)
    full = agent.critic(b.states)
    for i in range(6):
        assert q_taken[0, i] == full[0, i, b.actions[i]]
        assert q_taken[1, i] == full[1, i, b.actions[i]]


def test_modsac_updates_actor_less_when_critic_is_unreliable(make_agent):
    def actor_steps(loss, n=100):
        agent, _ = make_agent(AgentModSAC)
        agent.critic_loss_avg = loss
        return sum(agent.should_update_actor(torch.tensor(loss)) for _ in range(n))

    assert actor_steps(0.0) == 100  # reliable critic: every step
    assert 45 <= actor_steps(50.0) <= 55  # unreliable: every other step


def test_algorithm_that_does_not_fit_the_action_space_is_refused():
    spec = make_env("Pendulum-v1", 1).spec
    with pytest.raises(ConfigError, match="'dqn' cannot act in Pendulum-v1.*continuous") as err:
        agent_class("dqn", spec)
    # no multi-agent ones
    assert str(err.value).endswith("Algorithms that can: a2c, ddpg, dreamerv3, fast_sac, "
                                   "fast_td3, modsac, ppo, redq, sac, td3, tdmpc2.")  # fmt: skip
    with pytest.raises(ConfigError, match="can: a2c, d3qn, double_dqn, dqn, dreamerv3, ppo, "
                                          "pqn, sac_discrete.$"):  # fmt: skip
        agent_class("td3", make_env("CartPole-v1", 1).spec)


def test_buffer_that_cannot_fit_in_memory_is_refused_before_training(make_agent):
    with pytest.raises(ConfigError, match=r"buffer_size=1,000,000,000,000 .* needs [\d.]+ GiB"):
        make_agent(AgentSAC, buffer_size=10**12)


def test_n_step_returns_train_end_to_end_and_multi_agent_refuses_them(tmp_path):
    from xiaoyarl import ConfigError, train_agent
    from xiaoyarl.config import Config

    config = Config(algo="d3qn", env_id="CartPole-v1", n_step=3, max_steps=3000, eval_every=3000,
                    eval_episodes=1, confirm_episodes=0, learning_starts=500, threads=1,
                    cwd=str(tmp_path / "run"))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= 3000
    with pytest.raises(ConfigError, match="n_step=3: n-step returns are for the single-agent"):
        train_agent(Config(algo="vdn", env_id="SpreadDiscrete-v0", n_step=3, max_steps=100,
                           cwd=str(tmp_path / "vdn")), log=None)  # fmt: skip


def test_ensemble_layer_norm_is_each_members_own_layer_norm():
    """The critics' LayerNorm, written the obvious way: member k normalises its features over
    the last axis and applies its own gain and bias."""
    from xiaoyarl.core.off_policy_nets import EnsembleLayerNorm

    torch.manual_seed(0)
    norm = EnsembleLayerNorm(3, 5)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = torch.randn(3, 7, 5) * 4 + 2
    layer_norm = torch.nn.functional.layer_norm
    want = torch.stack([layer_norm(x[k], (5,), norm.weight[k, 0], norm.bias[k, 0])
                        for k in range(3)])  # fmt: skip
    torch.testing.assert_close(norm(x), want)


def test_layer_norm_puts_a_layer_norm_before_each_hidden_relu_of_the_critics(
    off_policy_cls, batch_for, make_agent
):
    cls = off_policy_cls
    from xiaoyarl.core.off_policy_nets import EnsembleLayerNorm

    agent, _ = make_agent(cls, layer_norm=True)
    critic = agent.qnet if hasattr(agent, "qnet") else agent.critic
    layers = [m for m in critic.modules()
              if isinstance(m, (nn.LayerNorm, EnsembleLayerNorm, nn.ReLU))]  # fmt: skip
    relus = [i for i, m in enumerate(layers) if isinstance(m, nn.ReLU)]
    norms = (nn.LayerNorm, EnsembleLayerNorm)
    assert relus and all(i > 0 and isinstance(layers[i - 1], norms) for i in relus)
    plain, _ = make_agent(cls)
    plain_critic = plain.qnet if hasattr(plain, "qnet") else plain.critic
    assert not any(isinstance(m, norms) for m in plain_critic.modules())
    logs, _ = agent.update_step(batch_for(agent))  # a gradient step through the normalised critic
    assert torch.isfinite(logs["critic_loss"])


@pytest.mark.parametrize(("algo", "env"), [("sac", "Pendulum-v1"), ("qmix", "SpreadDiscrete-v0")])
def test_layer_norm_critics_train_end_to_end(algo, env, tmp_path):
    from xiaoyarl import train_agent
    from xiaoyarl.config import Config

    config = Config(algo=algo, env_id=env, layer_norm=True, max_steps=600, eval_every=600,
                    eval_episodes=1, confirm_episodes=0, learning_starts=200, threads=1,
                    cwd=str(tmp_path / "run"))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["total_steps"] >= 600 and summary["updates"] > 0  # steps through the norms
    assert summary["final_eval_mean"] is not None and math.isfinite(summary["final_eval_mean"])
    saved = load_plain(tmp_path / "run" / "checkpoint" / "state.pt")
    tensors = [t for net in saved["agent"]["nets"].values() for t in net.values()]
    assert tensors and all(torch.isfinite(t).all() for t in tensors if t.is_floating_point())


def test_a_ratio_below_one_step_per_rollout_is_taken_as_asked():
    """replay_ratio 0.25 with one sub-env: the automatic horizon grows to 4 steps, so a rollout
    takes one gradient step (not one per 2 steps); an explicit horizon too short is refused."""
    from xiaoyarl import ConfigError
    from xiaoyarl.config import Config

    config = resolve_config(Config(algo="dqn", env_id="CartPole-v1", num_envs=1,
                                   replay_ratio=0.25), batched=False)  # fmt: skip
    assert config.horizon_len == 4
    default = resolve_config(Config(algo="dqn", env_id="CartPole-v1"), batched=False)
    assert default.horizon_len * default.num_envs * default.replay_ratio >= 1
    with pytest.raises(ConfigError, match="raise horizon_len to 4"):
        resolve_config(Config(algo="dqn", env_id="CartPole-v1", num_envs=1, horizon_len=2,
                              replay_ratio=0.25), batched=False)  # fmt: skip
