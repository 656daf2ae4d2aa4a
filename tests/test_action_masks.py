"""Single-agent action masks (`info["action_mask"]`): read by the gymnasium adapter, and never
taken by PPO, A2C, PQN, discrete SAC or the DQN family, when exploring, when evaluating, or
in the targets' max, argmax and soft values; saved policies pick among the allowed actions;
the agents that cannot honour masks say which can."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl import load_policy, train_agent
from xiaoyarl.agents.masked import (
    MASKED,
    AgentMaskedD3QN,
    AgentMaskedDQN,
    AgentMaskedPPO,
    AgentMaskedPQN,
    AgentMaskedSACDiscrete,
    masked_greedy,
    random_allowed,
)
from xiaoyarl.agents.registry import make_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError

ENV = "action_envs:PickAllowed-v0"  # raises when a masked action is taken


def test_the_adapter_passes_the_masks_of_each_state_and_of_each_final_state():
    with make_env(ENV, 3, seed=0) as env:
        assert env.spec.action_mask
        state, info = env.reset(seed=0)
        mask = info["action_mask"]
        assert mask.shape == (3, 4) and mask.dtype == torch.bool and mask.any(1).all()
        for _ in range(12):  # across the 10-step time limit: a truncation and its reset
            action = random_allowed(mask)
            state, _, terminated, truncated, info = env.step(action)
            mask = info["action_mask"]
            assert info["final_action_mask"].shape == (3, 4)
            going_on = ~(terminated | truncated)
            assert torch.equal(mask[going_on], info["final_action_mask"][going_on])


def test_masked_helpers_never_pick_a_masked_action():
    q = torch.tensor([[5.0, 1.0, 3.0], [0.0, 9.0, 2.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[False, True, True], [True, False, False], [False, False, False]])
    assert masked_greedy(q, mask).tolist() == [2, 0, 0]  # no allowed action: all are
    picks = random_allowed(mask.repeat(200, 1)).view(200, 3)
    assert set(picks[:, 0].tolist()) == {1, 2} and set(picks[:, 1].tolist()) == {0}


@pytest.mark.parametrize(("algo", "agent"), [("dqn", AgentMaskedDQN), ("d3qn", AgentMaskedD3QN)])
def test_the_td_targets_max_and_argmax_run_over_the_allowed_next_actions(algo, agent):
    with make_env(ENV, 2) as env:
        config = resolve_config(Config(algo=algo, env_id=ENV, num_envs=2, buffer_size=64),
                                batched=False)  # fmt: skip
        torch.manual_seed(0)
        masked = make_agent(algo, env.spec, config, torch.device("cpu"))
    assert type(masked) is agent
    next_obs = torch.rand(64, 4)
    next_mask = torch.rand(64, 4) < 0.5
    next_mask[:, 0] |= ~next_mask.any(1)
    packed = masked.pack(next_obs, next_mask)
    with torch.no_grad():
        got = masked.next_q(packed)
        target_q = masked.qnet_target.q_values(packed)
        online_q = masked.qnet.q_values(packed)
        if algo == "dqn":
            expected = torch.stack([target_q[i][next_mask[i]].max() for i in range(64)])
        else:  # the online network picks among the allowed, the target network scores it
            best = [torch.nonzero(next_mask[i])[online_q[i][next_mask[i]].argmax()].item()
                    for i in range(64)]  # fmt: skip
            expected = target_q[torch.arange(64), best]
        unmasked = target_q.max(-1).values if algo == "dqn" else target_q.gather(
            1, online_q.argmax(-1, keepdim=True)).squeeze(1)  # fmt: skip
    torch.testing.assert_close(got, expected)
    assert (got != unmasked).any()  # the masks changed some targets
    states = masked.pack(torch.rand(8, 4), torch.ones(8, 4, dtype=torch.bool))
    batch = Batch(states, torch.zeros(8, dtype=torch.long), torch.zeros(8),
                  torch.zeros(8, dtype=torch.bool), packed[:8], torch.arange(8),
                  torch.ones(8), torch.full((8,), 0.99))  # fmt: skip
    logs, _ = masked.update_step(batch)
    assert torch.isfinite(logs["critic_loss"])


@pytest.mark.learning
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("algo", "fields", "agent"),
    [
        ("ppo", {"num_envs": 8, "horizon_len": 32, "max_steps": 60_000}, AgentMaskedPPO),
        *[pytest.param("dqn", {"num_envs": 4, "max_steps": 12_000, "learning_starts": 500,
                               "explore_decay_steps": 3_000, "seed": seed}, AgentMaskedDQN,
                       marks=[pytest.mark.seeds] if seed else [], id=f"dqn-seed{seed}")
          for seed in (0, 1, 2)],  # BENCHMARKS.md: 3 of 3 with its defaults too
        ("pqn", {"max_steps": 60_000}, AgentMaskedPQN),  # its defaults
        ("sac_discrete", {"num_envs": 4, "max_steps": 12_000, "learning_starts": 500},
         AgentMaskedSACDiscrete),
    ],
)  # fmt: skip
def test_never_takes_a_masked_action_and_learns_to_pick_among_the_allowed(algo, fields, agent,
                                                                          tmp_path):  # fmt: skip
    """The env raises on a masked action, so training and its evaluations through the whole
    run are the check; picking the best allowed action scores 9 of 10 (random play among the
    allowed actions about 6, among all 2.5, DQN blind to the masks 5-6: BENCHMARKS.md)."""
    config = Config(algo=algo, env_id=ENV, threads=1, eval_every=2_000, confirm_episodes=20,
                    cwd=str(tmp_path), **{"seed": 0, **fields})  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["solved"], summary
    policy = load_policy(tmp_path)
    values = np.array([[0.9, 0.1, 0.5, 0.2], [0.9, 0.1, 0.5, 0.2]], dtype=np.float32)
    mask = np.array([[True, True, True, True], [False, True, True, False]])
    assert policy.predict(values, action_mask=mask).tolist() == [0, 2]
    explored = policy.predict(np.tile(values, (50, 1)), deterministic=False,
                              action_mask=np.tile(mask, (50, 1)))  # fmt: skip
    assert set(explored[1::2].tolist()) <= {1, 2}


@pytest.mark.parametrize("recurrent", [None, "lstm"])
def test_agents_that_cannot_honour_masks_say_which_can(recurrent):
    with make_env(ENV, 2) as env:
        config = resolve_config(Config(algo="sac", env_id=ENV, recurrent=recurrent),
                                batched=False)  # fmt: skip
        fits = r"a2c, d3qn, double_dqn, dqn, ppo, pqn, sac_discrete"
        with pytest.raises(ConfigError, match=rf"whose actions are discrete: .* Algorithms that "
                                              rf"can: {fits}\.$"):  # fmt: skip
            make_agent("sac", env.spec, config, torch.device("cpu"))


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn", "double_dqn", "d3qn", "pqn",
                                  "sac_discrete"])  # fmt: skip
def test_every_agent_that_honours_masks_does_with_a_recurrent_policy(algo):
    """The recurrent agent of each masked one (`agents/combined.py`); the matrix's test trains
    each and acts with its saved policy in an env that raises on a masked action."""
    with make_env(ENV, 2) as env:
        config = resolve_config(Config(algo=algo, env_id=ENV, recurrent="gru"), batched=False)
        agent = make_agent(algo, env.spec, config, torch.device("cpu"))
    assert type(agent).__name__.startswith("AgentRecurrentMasked")
    assert any(base in MASKED.values() for base in type(agent).__mro__)


def test_pqn_bootstraps_from_the_best_allowed_action_of_each_state_reached():
    with make_env(ENV, 2) as env:
        config = resolve_config(Config(algo="pqn", env_id=ENV, num_envs=2), batched=False)
        torch.manual_seed(0)
        agent = make_agent("pqn", env.spec, config, torch.device("cpu"))
    assert type(agent) is AgentMaskedPQN
    next_states = torch.rand(3, 2, 4)
    next_masks = torch.rand(3, 2, 4) < 0.5
    next_masks[..., 0] |= ~next_masks.any(-1)
    zeros = torch.zeros(3, 2)
    rollout = agent.rollout_class(next_states, zeros.long(), zeros, zeros.bool(), zeros.bool(),
                                  next_states, next_masks)  # fmt: skip
    with torch.no_grad():
        got = agent.next_values(rollout)
        q = agent.qnet.q_values(next_states.flatten(0, 1))
    allowed = next_masks.flatten(0, 1)
    expected = torch.stack([q[i][allowed[i]].max() for i in range(6)])
    torch.testing.assert_close(got, expected)
    assert (got != q.max(-1).values).any()  # the masks changed some targets


def test_discrete_sac_puts_no_probability_on_a_masked_action_and_sums_over_the_allowed():
    with make_env(ENV, 2) as env:
        config = resolve_config(Config(algo="sac_discrete", env_id=ENV, num_envs=2,
                                       buffer_size=64), batched=False)  # fmt: skip
        torch.manual_seed(0)
        agent = make_agent("sac_discrete", env.spec, config, torch.device("cpu"))
    assert type(agent) is AgentMaskedSACDiscrete
    mask = torch.tensor([[True, False, True, False], [False, True, False, False]])
    packed = agent.pack(torch.rand(2, 4), mask)
    probs, logprobs = agent.policy(packed)
    assert torch.all(probs[~mask] == 0) and torch.allclose(probs.sum(-1), torch.ones(2))
    assert torch.isfinite(probs * logprobs).all()
    target = agent.state_target_entropy(packed)  # half the uniform policy's over 2 and 1 actions
    torch.testing.assert_close(target, torch.tensor([0.5 * float(np.log(2)), 0.0]))
    picks = agent.masked_explore_action(packed.repeat(100, 1), mask.repeat(100, 1))
    assert mask.repeat(100, 1).gather(1, picks.unsqueeze(1)).all()
    assert agent.act(packed[:, :4], mask).tolist()[1] == 1
    batch = Batch(packed, torch.tensor([0, 1]), torch.zeros(2), torch.zeros(2, dtype=torch.bool),
                  packed, torch.arange(2), torch.ones(2), torch.full((2,), 0.99))  # fmt: skip
    logs, _ = agent.update_step(batch)
    assert all(torch.isfinite(value) for value in logs.values())
