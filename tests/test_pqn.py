"""PQN (`agents/pqn.py`): shapes, its Q(lambda) targets against a slow reference, and smoke runs
through the runners; its learning tests are in test_learning.py."""

from __future__ import annotations

import json

import pytest
import torch

from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.config_io import config_from_preset
from xiaoyarl.core.encoders import ChannelNorm
from xiaoyarl.core.optim import LeanKit
from xiaoyarl.core.returns import lambda_returns
from xiaoyarl.envs import make_env
from xiaoyarl.policy import Policy
from xiaoyarl.train.checkpoint import policy_state


@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_lambda_returns_match_the_textbook_recursion(lam, slow_lambda_returns):
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(12, 5, generator=g)
    next_values = torch.randn(12, 5, generator=g)
    terminals = torch.rand(12, 5, generator=g) < 0.15
    truncates = (torch.rand(12, 5, generator=g) < 0.15) & ~terminals
    truncates[3, 0] = terminals[3, 0] = True  # a terminal step at the time limit: no bootstrap
    got = lambda_returns(rewards, next_values, terminals, truncates, 0.9, lam)
    want = slow_lambda_returns(rewards, next_values, terminals, truncates, 0.9, lam)
    torch.testing.assert_close(got, want)
    if lam == 0.0:  # one-step targets
        torch.testing.assert_close(got, rewards + 0.9 * (~terminals) * next_values)


def make_pqn(num_envs=4, **fields):
    config = Config(algo="pqn", env_id="CartPole-v1", num_envs=num_envs, horizon_len=8,
                    net_dims=[16, 16], **fields)  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env("CartPole-v1", num_envs, seed=0)
    torch.manual_seed(0)
    agent = AgentPQN(env.spec, config, torch.device("cpu"))
    agent.last_state, _ = env.reset(seed=0)
    return agent, env


def test_rollout_shapes_update_and_exploration_schedule():
    agent, env = make_pqn(explore_decay_steps=64, explore_rate=0.1)
    assert agent.epsilon() == 1.0
    rollout = agent.explore_env(env, 8)
    assert rollout.states.shape == (8, 4, 4) and rollout.next_states.shape == (8, 4, 4)
    assert rollout.actions.shape == (8, 4) and rollout.actions.dtype == torch.int64
    assert rollout.rewards.shape == rollout.terminals.shape == rollout.truncates.shape == (8, 4)
    assert agent.epsilon() == pytest.approx(1.0 + 32 / 64 * (0.1 - 1.0))
    before = [p.clone() for p in agent.qnet.parameters()]
    logs = agent.update_net(rollout)
    assert set(logs) == {"critic_loss", "q_value"} and all(v.isfinite() for v in logs.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.qnet.parameters(), strict=True))
    # LayerNorm after each hidden layer, no target network among the nets
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in agent.qnet.modules()) == 2
    assert set(agent.nets) == {"qnet"}
    agent.explored = 10_000
    assert agent.epsilon() == pytest.approx(0.1)


def test_targets_bootstrap_from_the_greedy_value_of_the_state_reached(slow_lambda_returns):
    agent, env = make_pqn(q_lambda=0.5)
    rollout = agent.explore_env(env, 8)
    with torch.no_grad():
        next_q = agent.qnet.q_values(rollout.next_states).max(-1).values
    want = slow_lambda_returns(rollout.rewards, next_q, rollout.terminals, rollout.truncates,
                               agent.config.gamma, 0.5)  # fmt: skip
    torch.testing.assert_close(agent.q_lambda_targets(rollout), want)


def test_update_regresses_q_onto_the_targets_of_the_rollout():
    """One epoch of one mini-batch (the whole rollout): the step of the mean squared error
    against the targets computed before it, by hand."""
    agent, env = make_pqn(batch_size=32, repeat_times=1.0)
    rollout = agent.explore_env(env, 8)
    reference = AgentPQN(agent.spec, agent.config, torch.device("cpu"))
    reference.load_state_dict(agent.state_dict())
    targets = agent.q_lambda_targets(rollout).flatten()
    torch.manual_seed(1)
    agent.update_net(rollout)
    torch.manual_seed(1)
    order = torch.randperm(32)  # the one mini-batch `shuffled_minibatches` draws
    states, actions = rollout.states.flatten(0, 1)[order], rollout.actions.flatten()[order]
    q = reference.qnet.q_values(states).gather(1, actions.unsqueeze(1)).squeeze(1)
    loss = 0.5 * (q - targets[order]).square().mean()
    reference.optimizer_step(reference.optimizers["qnet"], reference.qnet, loss)
    for a, b in zip(agent.qnet.parameters(), reference.qnet.parameters(), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.distributed
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runner", [(), ("--runner", "parallel", "--num-workers", "2"),
                                    ("--learners", "2")])  # fmt: skip
def test_trains_through_each_runner(tmp_path, runner, cli):
    summary = tmp_path / "summary.json"
    result = cli("train", "pqn", "CartPole-v1", "--seed", "0", "--quiet", "--max-steps", "4096",
                 "--num-envs", "16", "--eval-every", "2048", "--target-return", "none",
                 "--cwd", str(tmp_path / "run"), "--summary-json", str(summary), *runner,
                 timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    done = json.loads(summary.read_text())
    assert done["total_steps"] >= 4096
    assert (tmp_path / "run" / "actor.pt").is_file()


def test_follows_its_papers_code_by_default():
    """As the paper's code: epsilon decays over a tenth of the budget (DQN's fixed 10,000 env
    steps were 0.6 of one rollout of 1,024 sub-envs); from the command line, RAdam, gradients
    clipped at norm 10 and a learning rate decaying linearly to 0 (its algorithm preset, and
    its MinAtar preset's, with the paper's one hidden layer of 128); LayerNorm after each
    convolution and hidden layer of its CNN, which a saved policy rebuilds."""
    for max_steps in (100_000, 5_000_000):
        config = resolve_config(Config(algo="pqn", env_id="CartPole-v1", max_steps=max_steps),
                                batched=True)  # fmt: skip
        assert config.explore_decay_steps == max_steps // 10
    dqn = resolve_config(Config(algo="dqn", env_id="CartPole-v1"), batched=True)
    assert dqn.explore_decay_steps == 10_000
    assert (dqn.optimizer, dqn.clip_grad_norm) == ("adam", 0.5)
    for env_id in ("Acrobot-v1", "MinAtar/Breakout-v1"):
        preset = config_from_preset("pqn", env_id)
        assert (preset.optimizer, preset.clip_grad_norm) == ("radam", 10)
        assert (preset.learning_rate_schedule, preset.schedule_end) == ("linear", 0.0)
    minatar = resolve_config(config_from_preset("pqn", "MinAtar/Breakout-v1"), batched=True)
    assert minatar.net_dims == [128] and minatar.explore_decay_steps == minatar.max_steps // 10
    env = make_env("MinAtar/Breakout-v1", 4, seed=0)
    torch.manual_seed(0)
    agent = AgentPQN(env.spec, minatar, torch.device("cpu"), kit=LeanKit())
    assert isinstance(agent.optimizers["qnet"], torch.optim.RAdam)
    kinds = [
        type(m).__name__
        for m in agent.qnet.modules()
        if isinstance(m, ChannelNorm | torch.nn.LayerNorm | torch.nn.Conv2d | torch.nn.Linear)
    ]
    # the convolution, LayerNorm over its channels; the hidden layer, its LayerNorm; the output
    assert kinds == ["Conv2d", "ChannelNorm", "LayerNorm", "Linear", "LayerNorm", "Linear"]
    state, _ = env.reset(seed=0)
    policy = Policy(policy_state(agent))
    torch.testing.assert_close(policy.actor.q_values(state), agent.qnet.q_values(state),
                               rtol=0, atol=0)  # fmt: skip
