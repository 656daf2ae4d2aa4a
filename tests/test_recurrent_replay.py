"""The replay agents with memory (`recurrent: lstm | gru` for the DQN family, SAC, TD3, ...; R2D2's
replayed sequences): the windows the buffer samples, against the steps stored; the networks'
outputs on a window, against a step-by-step reference from the stored hidden state (burn-in,
episode starts, n-step bootstraps from the hidden state after each transition's last step); the
hidden states exploring stores; and learning a task a feed-forward agent cannot (Pendulum
without its angular velocity)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.recurrent_replay import memories_of
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.recurrent import ReplayWindow, rnn_step
from xiaoyarl.core.sequence_replay import MemoryTransitions, SequenceReplayBuffer
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError


def filled_buffer(n_step: int = 3) -> SequenceReplayBuffer:
    """40 rows of 2 sub-envs whose state, action and hidden state say where they are stored
    (`10 * row + env`); sub-env 0 terminates at rows 5 and 22, sub-env 1 is truncated at row 9
    (its true last state -1)."""
    rows, n = 40, 2
    buffer = SequenceReplayBuffer(200, n, 1, 1, True, 50, n_step=n_step, gamma=0.5, hidden_dim=2,
                                  sequence_len=4, burn_in=3)  # fmt: skip
    where = (10 * torch.arange(rows).unsqueeze(1) + torch.arange(n)).float()  # (T, N)
    terminals = torch.zeros(rows, n, dtype=torch.bool)
    terminals[5, 0] = terminals[22, 0] = True
    truncates = torch.zeros(rows, n, dtype=torch.bool)
    truncates[9, 1] = True
    next_states = torch.cat([where[1:], where[-1:] + 10]).clone()
    next_states[9, 1] = -1.0
    for first in range(0, rows, 8):  # in rollouts of 8 steps
        part = slice(first, first + 8)
        buffer.add(MemoryTransitions(
            states=where[part].unsqueeze(-1), actions=where[part].long(),
            rewards=torch.ones(8, n), terminals=terminals[part], truncates=truncates[part],
            next_states=next_states[part].unsqueeze(-1),
            hiddens=torch.stack([where[part], -where[part]], dim=-1),
        ))  # fmt: skip
    return buffer


def test_a_window_is_consecutive_steps_of_one_sub_env_from_its_stored_hidden_state():
    torch.manual_seed(0)
    buffer = filled_buffer()
    batch_size = 64  # 16 windows of 4 trained steps
    windows = buffer.sample(batch_size)
    steps, num = 3 + 4 + 2, 16  # burn-in, trained, n_step - 1
    states = windows.states.view(steps, num)
    row, env = (states[0] // 10).long(), (states[0] % 10).long()
    # consecutive rows of one sub-env (the tail may stop at the newest row)
    want = (10 * (row + torch.arange(steps).unsqueeze(1)) + env).float()
    assert torch.equal(states[:7], want[:7])
    assert torch.equal(windows.hiddens, torch.stack([states[0], -states[0]], dim=1))
    # the step after an episode's last begins one (terminated, or truncated)
    ended = torch.zeros(steps, num, dtype=torch.bool)
    for t in range(steps - 1):
        r = row + t
        ended[t] = ((r == 5) | (r == 22)) & (env == 0) | (r == 9) & (env == 1)
    assert torch.equal(windows.starts[1:], ended[:-1]) and not windows.starts[0].any()
    # the trained transitions are the window's steps after the burn-in, n-step
    batch = windows.batch
    assert torch.equal(batch.states.view(4, num), states[3:7])
    assert torch.equal(batch.actions.view(4, num).float(), states[3:7])
    # each transition's next state is the one its last step reached: `last` names that step
    reached = states.flatten()[windows.last] + 10  # the row after the last step
    true_last = states.flatten()[windows.last] == 91  # row 9 of sub-env 1: truncated
    reached[true_last] = -1.0
    terminal = batch.terminals
    assert torch.equal(batch.next_states.flatten()[~terminal], reached[~terminal])
    # an n-step transition stops at its episode's end, and its discount says how far it went
    spans = windows.last // num - torch.arange(4 * num) // num - 3 + 1  # m
    torch.testing.assert_close(batch.discounts, 0.5 ** spans.float())
    assert (spans <= 3).all() and (spans >= 1).all()


def test_a_buffer_too_small_for_a_window_is_refused_and_sampling_waits_for_one():
    with pytest.raises(ConfigError, match="buffer_size"):
        SequenceReplayBuffer(20, 2, 1, 1, True, 50, hidden_dim=2, sequence_len=8, burn_in=4)
    buffer = SequenceReplayBuffer(200, 2, 1, 1, True, 50, hidden_dim=2, sequence_len=4,
                                  burn_in=3)  # fmt: skip
    assert buffer.num_sampleable == 0
    with pytest.raises(ValueError, match="no window"):
        buffer.sample(8)


def recurrent_agent(algo, env_id, kind, rollouts=40, **fields):
    config = Config(algo=algo, env_id=env_id, num_envs=4, recurrent=kind, recurrent_dim=8,
                    net_dims=[16], learning_starts=0, batch_size=32, sequence_len=8, burn_in=5,
                    **fields)  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env(env_id, 4, seed=0)
    torch.manual_seed(0)
    agent = make_agent(algo, env.spec, config, torch.device("cpu"))
    agent.last_state = agent.observe(*env.reset(seed=0))
    for _ in range(rollouts):  # 4 steps of each sub-env each
        agent.buffer.add(agent.explore_env(env, 4))
    env.close()
    return agent


def by_hand(memory, states, starts, hidden):
    """A memory's hidden states after each step `(W, B, Hs)`, one step at a time from `hidden`,
    zeroed where an episode starts."""
    afters = []
    for t in range(states.shape[0]):
        hidden = hidden * (~starts[t]).float().unsqueeze(1)
        hidden = rnn_step(memory.rnn, memory.inner(states[t]), hidden)[1]
        afters.append(hidden)
    return torch.stack(afters)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_the_q_values_on_a_window_follow_each_step_from_the_stored_hidden_state(kind):
    agent = recurrent_agent("double_dqn", "CartPoleNoVelocity-v1", kind, n_step=3)
    windows = agent.sample_batch()
    assert windows.starts.any(), "the windows should cross episode ends"
    steps, num = windows.starts.shape
    states = windows.states.view(steps, num, -1)
    batch = windows.batch
    width = agent.qnet.norm.rnn.hidden_size
    with torch.no_grad():
        for net in (agent.qnet, agent.qnet_target):
            memory = net.norm
            after = by_hand(memory, states, windows.starts, windows.hiddens)
            want = net.net(after[5:13, :, :width]).flatten(0, 1)  # the trained steps
            reached = rnn_step(memory.rnn, memory.inner(batch.next_states),
                               after.flatten(0, 1)[windows.last])[0]  # fmt: skip
            want_next = net.net(reached)
            window = ReplayWindow(windows.states, windows.starts, [windows.hiddens], 5,
                                  windows.last, batch.states, batch.next_states)  # fmt: skip
            with memory.replaying(window):
                torch.testing.assert_close(net.q_values(batch.states), want)
                torch.testing.assert_close(net.q_values(batch.next_states), want_next)
                with pytest.raises(RuntimeError, match="batch.states"):
                    net.q_values(batch.states.clone())
    # the agent's step replays the windows the same way: its loss is DQN's on those values
    logs, td_errors = agent.update_step(windows)
    assert td_errors.shape == (8 * num,) and torch.isfinite(logs["critic_loss"])


def test_exploring_stores_the_hidden_state_each_step_continued():
    agent = recurrent_agent("sac", "PendulumNoVelocity-v1", "lstm", rollouts=60)
    buffer, n, t = agent.buffer, 4, 240  # Pendulum's episodes last 200 steps
    actor, critic = agent.memories
    assert actor is agent.actor.norm and critic is agent.critic.norm
    assert [memory.slot for memory in memories_of(agent.critic_target)] == [1]
    stored = buffer.hiddens[:t]  # (T, N, actor's and critic's side by side)
    states = buffer.states[:t]
    starts = torch.zeros(t, n, dtype=torch.bool)
    starts[1:] = buffer.terminals[: t - 1] | (buffer.next_index[: t - 1] >= buffer.capacity)
    assert starts.any()
    with torch.no_grad():
        for memory, own in zip((actor, critic), stored.split(16, dim=-1), strict=True):
            after = by_hand(memory, states[:-1], starts[:-1], own[0])
            going_on = ~starts[1:]
            torch.testing.assert_close(own[1:][going_on], after[going_on])
            assert (own[1:][~going_on] == 0).all()  # an episode began: a zero state


def test_burn_in_steps_take_no_gradient():
    agent = recurrent_agent("dqn", "CartPoleNoVelocity-v1", "gru")
    windows = agent.sample_batch()
    batch, memory = windows.batch, agent.qnet.norm
    states = windows.states.clone().requires_grad_(True)
    window = ReplayWindow(states, windows.starts, [windows.hiddens], 5, windows.last,
                          batch.states, batch.next_states)  # fmt: skip
    with memory.replaying(window):
        agent.qnet.q_values(batch.states).sum().backward()
    grads = states.grad.view(*windows.starts.shape, -1).abs().sum((1, 2))  # per window step
    assert (grads[:5] == 0).all() and (grads[5:13] > 0).all() and (grads[13:] == 0).all()


def test_settings_recurrent_replay_cannot_take():
    for field in ({"per": True}, {"crossq": True}):
        with pytest.raises(ConfigError, match=next(iter(field))):
            recurrent_agent("sac", "PendulumNoVelocity-v1", "gru", **field)


@pytest.mark.learning
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.seeds), pytest.param(2, marks=pytest.mark.seeds)]
)
def test_recurrent_sac_learns_pendulum_without_its_velocity(seed, tmp_path):
    """A GRU SAC swings up and holds a pendulum it sees only the angle of (BENCHMARKS.md,
    "Memory": feed-forward SAC does not); its saved policy does it too, carrying its hidden
    state from step to step."""
    config = Config(algo="sac", env_id="PendulumNoVelocity-v1", recurrent="gru", seed=seed,
                    threads=1, max_steps=40_000, cwd=str(tmp_path))  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    env = make_env("PendulumNoVelocity-v1", 4, seed=123)
    state, _ = env.reset(seed=123)
    policy.reset()
    returns = np.zeros(4)
    for _ in range(200):
        state, reward, _, _, _ = env.step(policy.act_normalized(state))  # in [-1, 1]
        returns += reward.numpy()
    assert returns.mean() >= -250, returns
