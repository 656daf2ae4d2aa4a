"""Multi-discrete actions (MultiDiscrete, MultiBinary) for PPO and A2C: the log-probability is
the sum of the components' (a reference by hand), the adapter's offsets, learning, saved
policies, and the algorithms that cannot take them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.multi_discrete import AgentMultiDiscreteA2C, AgentMultiDiscretePPO
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
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
     ("a2c", "action_envs:CopyBits-v0", AgentMultiDiscreteA2C)],
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
        ("dqn", {}, r"multi-discrete \[2, 2, 2\]\. Algorithms that can: a2c, ppo\.$"),
        ("sac_discrete", {}, r"multi-discrete \[2, 2, 2\]\. Algorithms that can: a2c, ppo\.$"),
        ("sac", {}, r"actions are discrete\. Algorithms that can: a2c, ppo\.$"),  # not dqn or vdn
        ("ppo", {"recurrent": "gru"}, r"a recurrent policy; feed-forward: a2c, ppo\.$"),
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
