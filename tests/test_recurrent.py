"""Recurrent PPO, A2C and PQN (`recurrent: lstm | gru`): the loss on a rollout against a
step-by-step reference written out by hand (LSTM gates, resets at episode starts, the
categorical policy, the clipped surrogate; PQN's bootstrapped values), sequence mini-batches,
stateful evaluation and saved policies, and learning a task a feed-forward policy cannot
(CartPole without its velocities)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.recurrent import (
    AgentRecurrentA2C,
    AgentRecurrentDiscretePPO,
    AgentRecurrentPQN,
)
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError

ENV = "CartPoleNoVelocity-v1"


def agent_and_env(algo="ppo", env_id=ENV, recurrent="lstm", num_envs=4, **fields):
    config = Config(algo=algo, env_id=env_id, num_envs=num_envs, recurrent=recurrent,
                    recurrent_dim=8, net_dims=[16], **fields)  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env(env_id, num_envs, seed=0)
    torch.manual_seed(0)
    agent = make_agent(algo, env.spec, config, torch.device("cpu"))
    agent.last_state = agent.observe(*env.reset(seed=0))
    return agent, env


def lstm_by_hand(rnn, x, h, c):
    """One LSTM step written out: gates i, f, g, o from x and h (PyTorch's weight layout)."""
    gates = x @ rnn.weight_ih_l0.T + rnn.bias_ih_l0 + h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def reference_outputs(agent, rollout):
    """Logits `(T, N, A)` and values `(T, N)` of the rollout, one step and one sub-env's hidden
    state at a time, zeroed where an episode starts."""
    memory = agent.memory
    h, c = rollout.hiddens[0].chunk(2, dim=-1)
    logits, values = [], []
    for t in range(rollout.rewards.shape[0]):
        keep = (~rollout.starts[t]).float().unsqueeze(1)
        h, c = h * keep, c * keep
        x = agent.state_norm(rollout.states[t])
        h, c = lstm_by_hand(memory.rnn, x, h, c)
        logits.append(agent.actor.net(h))
        values.append(agent.critic.net(h).squeeze(-1))
    return torch.stack(logits), torch.stack(values)


def test_the_loss_on_a_rollout_equals_a_step_by_step_reference():
    agent, env = agent_and_env(horizon_len=48, batch_size=4 * 48, repeat_times=1.0)
    rollout = agent.explore_env(env, 48)
    assert rollout.starts[1:].any(), "the rollout should cross episode ends"
    assert rollout.hiddens.shape == (48, 4, 16) and rollout.starts.dtype == torch.bool
    with torch.no_grad():
        logits, values = reference_outputs(agent, rollout)
        logprobs = logits.log_softmax(-1)
        taken = logprobs.gather(-1, rollout.actions.unsqueeze(-1)).squeeze(-1)
    # exploring carried the same hidden states as the replay: the stored log-probabilities agree
    torch.testing.assert_close(taken, rollout.logprobs, rtol=1e-5, atol=1e-5)

    data = agent.ppo_batch(rollout)
    torch.testing.assert_close(data.old_outputs, values.flatten(), rtol=1e-5, atol=1e-5)
    everything = torch.arange(48 * 4)  # time-major: all four sub-envs' whole sequences
    loss, logs = agent.minibatch_loss(data, everything, torch.mean)

    # PPO's loss by hand on the reference outputs (weights unchanged: every ratio is 1)
    new = logits.log_softmax(-1).flatten(0, 1)
    logprob = new.gather(-1, data.actions.unsqueeze(-1)).squeeze(-1)
    ratio = (logprob - data.old_logprobs).exp()
    eps = agent.config.ratio_clip
    surrogate = torch.min(ratio * data.advantages, ratio.clamp(1 - eps, 1 + eps) * data.advantages)
    entropy = -(new.exp() * new).sum(-1)
    actor_loss = -(surrogate.mean() + agent.config.lambda_entropy * entropy.mean())
    critic_loss = 0.5 * (data.returns - values.flatten()).square().mean()
    torch.testing.assert_close(loss, actor_loss + critic_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logs[1], critic_loss.detach(), rtol=1e-5, atol=1e-6)
    env.close()


def test_the_value_of_the_state_a_step_reached_continues_from_the_hidden_state_after_it():
    """What bootstrapping (also through truncation) reads: V(reached state) from the hidden
    state after the step, before any reset."""
    agent, env = agent_and_env(horizon_len=16, batch_size=64)
    rollout = agent.explore_env(env, 16)
    agent.sequences = (rollout.hiddens[0], rollout.starts)
    _, next_outputs = agent.critic_outputs(rollout.states, rollout.next_states)
    _, values = reference_outputs(agent, rollout)
    # where the next step goes on in the same episode, its value is the next state's
    same = ~(rollout.terminals | rollout.truncates)[:-1]
    torch.testing.assert_close(next_outputs.view(16, 4)[:-1][same], values[1:][same],
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    env.close()


def test_pqn_bootstraps_from_the_hidden_state_after_each_step_along_each_sequence():
    """max_a Q(s', a) of each step's reached state, computed one step and one sub-env at a
    time: the GRU zeroed where an episode starts, the reached state read from the hidden state
    after its step (before any reset)."""
    agent, env = agent_and_env("pqn", recurrent="gru", horizon_len=24, batch_size=32)
    assert type(agent) is AgentRecurrentPQN
    rollout = agent.explore_env(env, 24)
    assert rollout.starts[1:].any()  # episodes ended inside the rollout
    agent.read_sequences(rollout)
    with torch.no_grad():
        got = agent.next_values(rollout).view(24, 4)
        rnn, net = agent.memory.rnn, agent.qnet.net
        h = rollout.hiddens[0]
        for t in range(24):
            h = h * (~rollout.starts[t]).float().unsqueeze(1)
            h = rnn(agent.state_norm(rollout.states[t]).unsqueeze(0), h.unsqueeze(0))[1][0]
            reached = rnn(agent.state_norm(rollout.next_states[t]).unsqueeze(0), h.unsqueeze(0))[0]
            expected = net(reached[0]).max(-1).values
            torch.testing.assert_close(got[t], expected, rtol=1e-5, atol=1e-5)
    before = [p.clone() for p in agent.memory.rnn.parameters()]
    logs = agent.update_net(rollout)
    assert all(torch.isfinite(v) for v in logs.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.memory.rnn.parameters(),
                                                     strict=True))  # fmt: skip
    env.close()


def test_minibatches_are_whole_sequences_of_sub_envs():
    agent, env = agent_and_env(num_envs=8, horizon_len=16, batch_size=32, repeat_times=2.0)
    batches = agent.minibatches(16, 8)
    assert len(batches.indices) == 2 * 8 // 2  # 2 sub-envs a mini-batch, 2 epochs
    for idx in batches.indices:
        envs = (idx % 8).view(16, -1)
        assert (envs == envs[0]).all()  # the same sub-envs at every step
        assert ((idx // 8).view(16, -1) == torch.arange(16).unsqueeze(1)).all()  # time-major
    env.close()


@pytest.mark.parametrize(("algo", "env_id", "kind"),
                         [("ppo", ENV, "gru"), ("a2c", "Pendulum-v1", "lstm")])  # fmt: skip
def test_an_update_runs_for_ppo_and_a2c_with_both_cells(algo, env_id, kind):
    agent, env = agent_and_env(algo, env_id, kind, horizon_len=8, batch_size=16)
    expected = {"ppo": AgentRecurrentDiscretePPO, "a2c": AgentRecurrentA2C}[algo]
    assert type(agent) is expected
    before = [p.clone() for p in agent.memory.rnn.parameters()]
    logs = agent.update_net(agent.explore_env(env, 8))
    assert all(torch.isfinite(v) for v in logs.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.memory.rnn.parameters(),
                                                     strict=True))  # fmt: skip
    env.close()


def test_settings_a_recurrent_policy_cannot_take():
    with pytest.raises(ConfigError, match="share_encoder"):
        agent_and_env(share_encoder=False)
    with pytest.raises(ConfigError, match="without the H-term"):
        resolve_config(Config(recurrent="lstm", h_term=True), batched=True)
    with pytest.raises(ConfigError, match="recurrent"):
        resolve_config(Config(recurrent="rnn"), batched=True)


def saved_policy_returns(run) -> np.ndarray:
    """The returns of the run's saved policy over one episode in each of 4 sub-envs, played
    through `predict`, which carries its hidden state from call to call."""
    policy = load_policy(run)
    env = make_env(ENV, 4, seed=123)
    state, _ = env.reset(seed=123)
    policy.reset()
    returns = np.zeros(4)
    running = np.ones(4, dtype=bool)
    for _ in range(500):
        action = policy.predict(state.numpy())
        state, reward, terminated, truncated, _ = env.step(torch.as_tensor(action))
        returns += reward.numpy() * running
        running &= ~(terminated | truncated).numpy()
    return returns


@pytest.mark.learning
@pytest.mark.timeout(600)
def test_learns_cartpole_without_velocities_and_the_saved_policy_remembers(tmp_path):
    """A GRU policy solves what a feed-forward one cannot (BENCHMARKS.md: 3 of 3 seeds each);
    the saved policy plays it through `predict`, carrying its hidden state."""
    config = Config(algo="ppo", env_id=ENV, recurrent="gru", seed=0, threads=1,
                    max_steps=150_000, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    returns = saved_policy_returns(tmp_path)
    assert returns.mean() >= 475, returns


@pytest.mark.learning
@pytest.mark.timeout(900)
def test_learns_cartpole_without_velocities_with_worker_processes(tmp_path):
    """Two worker processes of 8 sub-envs each explore with their own hidden states, and the
    learner joins their rollouts, hidden states with them, along the sub-env axis: the GRU
    policy solves the task as in one process (seed 0: 61,440 env steps)."""
    config = Config(algo="ppo", env_id=ENV, recurrent="gru", seed=0, threads=1,
                    max_steps=150_000, runner="parallel", num_workers=2, num_envs=8,
                    cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    returns = saved_policy_returns(tmp_path)
    assert returns.mean() >= 475, returns


@pytest.mark.learning
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_pqn_with_a_gru_learns_cartpole_without_velocities(seed, tmp_path):
    """A recurrent PQN (its defaults) solves what a feed-forward one cannot (BENCHMARKS.md,
    "Memory"); its saved policy plays it through `predict`, carrying its hidden state."""
    config = Config(algo="pqn", env_id=ENV, recurrent="gru", seed=seed, threads=1,
                    max_steps=300_000, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    returns = saved_policy_returns(tmp_path)
    assert returns.mean() >= 400, returns
