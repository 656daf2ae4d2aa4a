"""Multi-discrete actions (MultiDiscrete, MultiBinary): for PPO and A2C the log-probability is
the sum of the components' (a reference by hand); for the DQN family and PQN, action branching's
targets and dueling heads (references by hand); the adapter's offsets, learning, saved policies,
and the algorithms that cannot take them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.multi_discrete import (
    AgentBranchingD3QN,
    AgentBranchingDQN,
    AgentBranchingPQN,
    AgentMultiDiscreteA2C,
    AgentMultiDiscretePPO,
)
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.multi_discrete import ActorMultiDiscretePPO
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError


def test_the_log_probability_is_the_sum_of_the_components():
    torch.manual_seed(0)
    nvec = (3, 2, 4)
    actor = ActorMultiDiscretePPO(5, 9, [16], RunningNorm(5, enabled=False), nvec)
    with torch.no_grad():  # logits large enough that the components' probabilities differ
        actor.net[-1].weight.mul_(300)
    state = torch.randn(6, 5)
    action = torch.stack([torch.randint(k, (6,)) for k in nvec], dim=1)  # (6, 3)
    logprob, entropy = actor.get_logprob_entropy(state, action)

    logits = actor.net(state)
    expected_logprob = torch.zeros(6)
    expected_entropy = torch.zeros(6)
    start = 0
    for k, n in enumerate(nvec):  # each component's categorical, written out
        p = torch.softmax(logits[:, start : start + n], dim=-1)
        expected_logprob += torch.log(p[torch.arange(6), action[:, k]])
        expected_entropy -= (p * torch.log(p)).sum(-1)
        start += n
    torch.testing.assert_close(logprob, expected_logprob, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy, rtol=1e-5, atol=1e-5)
    assert entropy.std() > 0.01  # the components' probabilities were not uniform

    sampled, sampled_logprob = actor.get_action(state)
    assert sampled.shape == (6, 3) and sampled.dtype == torch.int64
    assert all(int(sampled[:, k].max()) < n for k, n in enumerate(nvec))
    torch.testing.assert_close(sampled_logprob, actor.get_logprob_entropy(state, sampled)[0])
    greedy = actor(state)
    for k, n in enumerate(nvec):
        start = sum(nvec[:k])
        assert torch.equal(greedy[:, k], logits[:, start : start + n].argmax(-1))


@pytest.mark.parametrize("algo", ["dqn", "double_dqn", "d3qn"])
def test_branching_targets_are_the_mean_of_each_branchs_next_value(algo):
    """y = r + gamma * mean_k Q'_k(s', a'_k): a'_k the target's argmax in branch k (DQN) or the
    online network's (Double DQN, D3QN); each branch's Q of its component is regressed on y."""
    env_id, nvec = "action_envs:CopyDigits-v0", (3, 2)
    with make_env(env_id, 2) as env:
        config = resolve_config(Config(algo=algo, env_id=env_id, buffer_size=64), batched=False)
        torch.manual_seed(0)
        agent = make_agent(algo, env.spec, config, torch.device("cpu"))
    for p in agent.qnet_target.parameters():  # a target network unlike the online one
        p.data.add_(torch.randn_like(p) * 0.3)
    next_states = torch.rand(16, 5)
    with torch.no_grad():
        got = agent.next_q(next_states)
        target_q, online_q = (net.q_values(next_states) for net in (agent.qnet_target, agent.qnet))
    expected = torch.zeros(16)
    for i in range(16):
        start = 0
        for n in nvec:
            chooser = (target_q if algo == "dqn" else online_q)[i, start : start + n]
            expected[i] += target_q[i, start + int(chooser.argmax())] / len(nvec)
            start += n
    torch.testing.assert_close(got, expected)
    actions = torch.tensor([[2.0, 1.0]] * 4)  # the buffer keeps the components as a vector
    batch = Batch(next_states[:4], actions, torch.ones(4), torch.zeros(4, dtype=torch.bool),
                  next_states[4:8], torch.arange(4), torch.ones(4),
                  torch.full((4,), 0.9))  # fmt: skip
    loss, q, _ = agent.q_kind.loss(agent, batch)
    with torch.no_grad():
        now = agent.qnet.q_values(next_states[:4])
        y = 1.0 + 0.9 * agent.next_q(next_states[4:8])
    chosen = torch.stack([now[:, 2], now[:, 3 + 1]], 1)
    want = torch.nn.functional.huber_loss(chosen, y.unsqueeze(1).expand(4, 2))
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(q, chosen.mean(1))


def test_a_dueling_branch_subtracts_its_own_mean_advantage():
    from xiaoyarl.core.off_policy_nets import QNetDuel

    torch.manual_seed(0)
    net = QNetDuel(4, 5, [8], RunningNorm(4, enabled=False), nvec=(3, 2))
    state = torch.rand(6, 4)
    hidden = net.net(state)
    value, advantage = net.value_head(hidden), net.advantage_head(hidden)
    first, second = advantage[:, :3], advantage[:, 3:]
    expected = torch.cat([value + first - first.mean(1, keepdim=True),
                          value + second - second.mean(1, keepdim=True)], 1)  # fmt: skip
    torch.testing.assert_close(net.q_values(state), expected)
    assert net(state).shape == (6, 2) and net.init_kwargs()["nvec"] == [3, 2]


@pytest.mark.parametrize(("env_id", "nvec"),
                         [("action_envs:CopyDigits-v0", (3, 2)),
                          ("action_envs:CopyBits-v0", (2, 2, 2))])  # fmt: skip
def test_the_adapter_describes_and_takes_multi_discrete_actions(env_id, nvec):
    with make_env(env_id, 3, seed=0) as env:
        assert env.spec.action_nvec == nvec and env.spec.action_dim == sum(nvec)
        assert env.spec.if_discrete
        env.reset(seed=0)
        env.step(torch.zeros(3, len(nvec), dtype=torch.int64))  # CopyDigits' start is 1: offset
        with pytest.raises(Exception, match=rf"shape \(3, {len(nvec)}\)"):
            env.step(torch.zeros(3, dtype=torch.int64))


@pytest.mark.learning
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("algo", "env_id", "agent"),
    [("ppo", "action_envs:CopyDigits-v0", AgentMultiDiscretePPO),
     ("a2c", "action_envs:CopyBits-v0", AgentMultiDiscreteA2C),
     ("dqn", "action_envs:CopyBits-v0", AgentBranchingDQN),
     ("d3qn", "action_envs:CopyDigits-v0", AgentBranchingD3QN),
     ("pqn", "action_envs:CopyDigits-v0", AgentBranchingPQN)],
)  # fmt: skip
def test_learns_to_copy_and_the_saved_policy_answers(algo, env_id, agent, tmp_path):
    with make_env(env_id, 2) as env:
        config = resolve_config(Config(algo=algo, env_id=env_id), batched=False)
        assert type(make_agent(algo, env.spec, config, torch.device("cpu"))) is agent
    config = Config(algo=algo, env_id=env_id, seed=0, threads=1, max_steps=60_000,
                    eval_every=2_000, confirm_episodes=20, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    if env_id.endswith("CopyDigits-v0"):
        obs = np.zeros((3, 5), dtype=np.float32)
        obs[[0, 1, 2], [2, 0, 1]] = 1.0
        obs[[0, 1, 2], [3, 4, 4]] = 1.0
        assert policy.predict(obs).tolist() == [[2, 0], [0, 1], [1, 1]]  # before the offsets
    else:
        bits = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.float32)
        assert policy.predict(bits).tolist() == [[1, 0, 1], [0, 1, 1]]


@pytest.mark.parametrize(
    ("algo", "fields", "words"),
    [
        ("sac_discrete", {}, r"multi-discrete \[2, 2, 2\]: its exact sums run over every joint "
                             r"action.*\. Algorithms that can: a2c, d3qn, double_dqn, dqn, ppo, "
                             r"pqn\.$"),
        ("sac", {}, r"actions are discrete: its actor learns through the gradient of the "
                    r"critic's Q-value with respect to a continuous action\. Algorithms that "
                    r"can: a2c, d3qn, double_dqn, dqn, ppo, pqn\.$"),  # not sac_discrete or vdn
        ("sac_discrete", {"recurrent": "gru"}, r"multi-discrete \[2, 2, 2\]: its exact sums .*\. "
                                               r"Algorithms that can: a2c, d3qn, double_dqn, dqn, "
                                               r"ppo, pqn\.$"),  # with memory as without
    ],
)  # fmt: skip
def test_algorithms_that_cannot_take_multi_discrete_actions_say_which_can(algo, fields, words):
    """The algorithms named are those whose agents take the env (`algorithms_for`): `sac`
    suggested dqn, which refuses multi-discrete actions, and multi-agent algorithms."""
    with make_env("action_envs:CopyBits-v0", 2) as env:
        config = resolve_config(Config(algo=algo, env_id="action_envs:CopyBits-v0", **fields),
                                batched=False)  # fmt: skip
        with pytest.raises(ConfigError, match=words):
            make_agent(algo, env.spec, config, torch.device("cpu"))


@pytest.mark.parametrize("env_id", ["action_envs:CopyDigits-v0", "action_envs:CopyBits-v0"])
def test_the_env_checker_passes_multi_discrete_envs(env_id):
    from xiaoyarl.envs.check import check_env

    assert check_env(env_id) == []
