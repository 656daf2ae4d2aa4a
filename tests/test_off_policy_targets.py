"""Off-policy updates as a whole, against references written the slow, obvious way: the TD target
`r + gamma * (1 - terminal) * V'`, importance weights in the loss, TD errors reaching the
priorities, target-network schedules (TD3's delayed targets included), ModSAC's per-call actor
schedule, the DQN epsilon schedule, DDPG's exploration noise and the observation normaliser."""

import math

import pytest
import torch

from xiaoyarl.agents import (
    AgentD3QN,
    AgentDDPG,
    AgentDoubleDQN,
    AgentDQN,
    AgentModSAC,
    AgentREDQ,
    AgentSAC,
    AgentSACDiscrete,
    AgentTD3,
)
from xiaoyarl.train.checkpoint import policy_state

Q_LEARNERS = (AgentDQN, AgentDoubleDQN, AgentD3QN)


@pytest.fixture
def weighted_batch(batch_for):
    """`weighted_batch(agent, size=6)`: a batch with terminals on every other transition and
    uneven importance weights."""
    return lambda agent, size=6: batch_for(agent, size)._replace(
        weights=torch.linspace(0.2, 2.0, size)
    )


def reference_critic_loss(agent, batch, seed, next_value):
    """The critic loss of one update, written out: the TD target r + gamma^m (1 - d) V(s') (V'
    from the agent's own next-value function, under the same random draws; m the steps an
    n-step transition spans, as `batch.discounts` gives them), each critic's error weighted by
    the batch's importance weights."""
    with torch.no_grad():
        torch.manual_seed(seed)
        if isinstance(agent, Q_LEARNERS):
            next_v = agent.next_q(batch.next_states)
        else:
            next_v = next_value(agent, batch)
        target = torch.tensor([
            batch.rewards[i].item()
            + (0.0 if batch.terminals[i] else batch.discounts[i].item() * next_v[i].item())
            for i in range(len(batch.rewards))
        ])  # fmt: skip
        if isinstance(agent, Q_LEARNERS):
            q = agent.qnet.q_values(batch.states).gather(1, batch.actions[:, None])[:, 0]
            losses = [torch.nn.functional.huber_loss(q[i], target[i]) for i in range(len(q))]
            return sum(w * loss for w, loss in zip(batch.weights, losses, strict=True)) / len(q)
        q = agent.critic_q(batch.states, batch.actions)  # (num_critics, B)
        per_critic = [(batch.weights * (target - q[k]) ** 2).mean() for k in range(q.shape[0])]
        return sum(per_critic)


@pytest.mark.parametrize("n_step", [1, 3])
def test_critic_loss_uses_the_whole_td_target_and_the_importance_weights(
    off_policy_cls, n_step, make_agent, next_value, weighted_batch
):
    agent, _ = make_agent(off_policy_cls, policy_noise_std=0.0)
    batch = weighted_batch(agent)
    gamma = agent.config.gamma
    assert bool((batch.discounts == torch.tensor(gamma)).all())
    if n_step > 1:  # n-step transitions spanning 1, 2 or 3 steps
        batch = batch._replace(discounts=gamma ** torch.tensor([1.0, 2, 3, 3, 2, 1]))
    want = reference_critic_loss(agent, batch, 11, next_value)
    torch.manual_seed(11)
    logs, td_errors = agent.update_step(batch)
    torch.testing.assert_close(logs["critic_loss"], want.float(), rtol=1e-5, atol=1e-6)
    assert td_errors.shape == (6,)


@pytest.mark.parametrize("cls", [AgentTD3, AgentSAC, AgentREDQ], ids=["td3", "sac", "redq"])
def test_priority_of_a_critic_ensemble_is_the_mean_absolute_td_error(
    cls, make_agent, next_value, weighted_batch
):
    """Critics whose errors have opposite signs must not cancel in the priority (the signed mean
    over critics gave such a transition too low a priority)."""
    agent, _ = make_agent(cls, policy_noise_std=0.0)
    batch = weighted_batch(agent)
    with torch.no_grad():
        torch.manual_seed(11)
        next_v = next_value(agent, batch)
        target = batch.rewards + agent.config.gamma * (~batch.terminals).float() * next_v
        q = agent.critic_q(batch.states, batch.actions)  # (num_critics, B), before the step
    want = torch.stack([
        sum(abs(target[i] - q[k, i]) for k in range(q.shape[0])) / q.shape[0]
        for i in range(len(target))
    ])  # fmt: skip
    torch.manual_seed(11)
    _, td_errors = agent.update_step(batch)
    torch.testing.assert_close(td_errors, want, rtol=1e-5, atol=1e-6)


def test_gradient_step_sets_each_priority_to_its_td_error(make_agent):
    agent, env = make_agent(AgentDQN, per=True, batch_size=16, learning_starts=0)
    twin, _ = make_agent(AgentDQN, per=True, batch_size=16, learning_starts=0)
    for _ in range(3):
        rollout = agent.explore_env(env, 8)
        agent.buffer.add(rollout)
        twin.buffer.add(rollout)
    batch = agent.buffer.sample(16)
    _, td_errors = twin.update_step(batch)  # the same networks and batch: the same TD errors
    agent.gradient_step(batch)
    buf = agent.buffer
    leaf = buf.sum_tree[buf.tree_size + batch.indices]
    last = {int(i): k for k, i in enumerate(batch.indices)}  # duplicates: the last one wins
    want = torch.tensor([(abs(td_errors[last[int(i)]].item()) + buf.eps) ** buf.alpha
                         for i in batch.indices], dtype=leaf.dtype)  # fmt: skip
    torch.testing.assert_close(leaf, want, rtol=1e-5, atol=1e-7)


def test_soft_target_update_every_step_is_a_lerp_by_tau(batch_for, make_agent):
    agent, _ = make_agent(AgentSAC, soft_update_tau=0.1)
    before = [p.clone() for p in agent.critic_target.parameters()]
    agent.updates = 0
    agent.update_step(batch_for(agent))
    for old, new, online in zip(before, agent.critic_target.parameters(),
                                agent.critic.parameters(), strict=True):  # fmt: skip
        torch.testing.assert_close(new, old + 0.1 * (online - old))


def test_periodic_target_update_copies_every_k_steps(batch_for, make_agent):
    agent, _ = make_agent(AgentDQN, soft_update_tau=1.0, target_update_every=3)
    copied = []
    for step in range(6):
        agent.updates = step
        agent.update_step(batch_for(agent))
        same = all(
            torch.equal(a, b)
            for a, b in zip(agent.qnet_target.parameters(), agent.qnet.parameters(), strict=True)
        )
        copied.append(same)  # fmt: skip
    assert copied == [True, False, False, True, False, False]


def changed(before: list[torch.Tensor], net: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_td3_updates_both_targets_only_on_the_delayed_steps(batch_for, make_agent):
    agent, _ = make_agent(AgentTD3, policy_delay=2)
    moved = []
    for step in range(4):
        agent.updates = step
        critic_t = [p.clone() for p in agent.critic_target.parameters()]
        actor_t = [p.clone() for p in agent.actor_target.parameters()]
        agent.update_step(batch_for(agent))
        moved.append((changed(critic_t, agent.critic_target), changed(actor_t, agent.actor_target)))
    assert moved == [(True, True), (False, False), (True, True), (False, False)]


def test_ddpg_and_sac_update_the_target_critics_every_step(batch_for, make_agent):
    for cls in (AgentDDPG, AgentSAC, AgentREDQ):
        agent, _ = make_agent(cls)
        for step in range(3):
            agent.updates = step
            before = [p.clone() for p in agent.critic_target.parameters()]
            agent.update_step(batch_for(agent))
            assert changed(before, agent.critic_target), (cls, step)


def test_dqn_epsilon_decays_linearly_then_stays_and_drives_exploration(make_agent):
    agent, _ = make_agent(AgentDQN, explore_rate=0.1, explore_decay_steps=1000)
    for explored, want in ((0, 1.0), (250, 0.775), (500, 0.55), (1000, 0.1), (5000, 0.1)):
        agent.explored = explored
        assert math.isclose(agent.epsilon(), want, rel_tol=1e-9)
    agent.explored = 500
    state = torch.randn(20_000, 4)
    greedy = agent.qnet(state)
    differ = (agent.explore_action(state) != greedy).float().mean().item()
    assert abs(differ - 0.55 / 2) < 0.015  # a random action differs from the greedy half the time


def test_ddpg_exploration_noise_has_the_configured_std_and_stays_in_bounds(make_agent):
    agent, _ = make_agent(AgentDDPG, explore_noise_std=0.2)
    state = torch.randn(20_000, 3)
    with torch.no_grad():
        agent.actor.net[-1].weight.zero_()
        agent.actor.net[-1].bias.zero_()  # the actor says 0: noise alone is left
    action = agent.explore_action(state)
    assert abs(action.std().item() - 0.2) < 0.01 and abs(action.mean().item()) < 0.01
    agent.config.explore_noise_std = 5.0
    assert agent.explore_action(state).abs().max() <= 1.0


def test_modsac_restarts_its_actor_schedule_with_every_update_call(make_agent):
    """After a calm phase (low critic loss, the actor steps every time) the loss rises: the
    actor must keep stepping on about half of the critic steps, not stall for thousands."""
    agent, env = make_agent(AgentModSAC, learning_starts=0, batch_size=8)
    rollout = agent.explore_env(env, 4)  # 16 gradient steps per update call
    loss = {"value": 0.01}
    actor_steps = []

    def gradient_step(batch):
        actor_steps.append(agent.should_update_actor(torch.tensor(loss["value"])))
        return {}

    agent.gradient_step = gradient_step
    agent.buffer.add(rollout)
    agent.buffer.add = lambda rollout: None  # one rollout, replayed: the schedule is tested here
    for _ in range(125):  # 2,000 calm critic steps
        agent.update_net(rollout)
    calm = sum(actor_steps)
    loss["value"] = 3.0
    actor_steps.clear()
    for _ in range(250):  # 4,000 critic steps with a high loss
        agent.update_net(rollout)
    assert calm >= 1_700  # the reliability starts low (loss average 1.0) and rises
    assert 1_900 <= sum(actor_steps) <= 2_700  # about 1 / (2 - r) with r falling to ~0


@pytest.mark.parametrize("cls", [AgentDQN, AgentSAC, AgentTD3, AgentSACDiscrete])
def test_off_policy_state_norm_is_updated_shared_with_targets_and_checkpointed(cls, make_agent):
    agent, env = make_agent(cls, state_norm=True, learning_starts=0)
    rollouts = [agent.explore_env(env, 8) for _ in range(3)]
    for rollout in rollouts:
        agent.update_net(rollout)
    states = torch.cat([r.states.flatten(0, 1) for r in rollouts])
    torch.testing.assert_close(agent.state_norm.mean, states.mean(0), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(agent.state_norm.var, states.var(0, unbiased=False),
                               rtol=1e-3, atol=1e-5)  # fmt: skip
    for name, net in agent.nets.items():
        if hasattr(net, "norm"):
            assert net.norm is agent.state_norm, name  # targets see states as the online nets
    state = agent.state_dict()
    fresh, _ = make_agent(cls, state_norm=True)
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh.state_norm.mean, agent.state_norm.mean)
    assert policy_state(agent)["actor"]["norm.mean"].abs().sum() > 0  # actor.pt carries it


def test_state_norm_clamp_is_an_option():
    from xiaoyarl.core.nets import RunningNorm

    norm = RunningNorm(2, enabled=True, clip=10.0)
    big = torch.tensor([[30.0, -40.0]])
    assert norm(big).abs().max() == 10.0
    torch.testing.assert_close(RunningNorm(2, enabled=True, clip=None)(big), big)
    assert torch.equal(RunningNorm(2, enabled=False)(big), big)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_lean_adam_and_gradient_clipping_equal_torchs_own(weight_decay):
    """`xiaoyarl.core.optim.Adam` and `clip_grad_norm` (the agents' optimizer path on a CPU) give
    bit for bit the parameters and optimizer state of `clip_grad_norm_` + fused `torch.optim.
    Adam` (AdamW with a weight decay), and their state dicts load into each other."""
    import copy

    from torch import nn

    from xiaoyarl.core.optim import Adam, clip_grad_norm

    torch.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    theirs = copy.deepcopy(ours)
    opt_ours = Adam(ours.parameters(), lr=1e-3, eps=1e-5, weight_decay=weight_decay)
    torch_adam = torch.optim.AdamW if weight_decay else torch.optim.Adam
    opt_theirs = torch_adam(theirs.parameters(), lr=1e-3, eps=1e-5, weight_decay=weight_decay,
                            fused=True)  # fmt: skip
    for i in range(30):
        x = torch.randn(16, 4) * 5
        for net, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad(set_to_none=True)
            net(x).square().sum().backward()
        clip_grad_norm(list(ours.parameters()), 0.5)
        opt_ours.step()
        nn.utils.clip_grad_norm_(theirs.parameters(), 0.5, foreach=True)
        opt_theirs.step()
        if i == 10:  # a checkpoint round trip in both directions, mid-training
            opt_ours.load_state_dict(copy.deepcopy(opt_theirs.state_dict()))
            opt_theirs.load_state_dict(copy.deepcopy(opt_ours.state_dict()))
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    mine, torchs = opt_ours.state_dict(), opt_theirs.state_dict()
    assert mine["param_groups"][0].keys() == torchs["param_groups"][0].keys()
    for key, state in torchs["state"].items():
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(mine["state"][key][name], state[name])


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_torch_kit_and_lean_kit_update_an_agent_alike(algo):
    """An agent built directly steps torch's Adam and clipping (`TorchKit`); the trainer's
    (`make_agent`) steps the lean ones (`LeanKit`): the same weights after the same updates."""
    from xiaoyarl.agents import agent_class
    from xiaoyarl.agents import make_agent as build_agent
    from xiaoyarl.agents.base import TorchKit
    from xiaoyarl.agents.settings import resolve_config
    from xiaoyarl.config import Config
    from xiaoyarl.core.optim import Adam
    from xiaoyarl.envs import make_env

    env_id = "CartPole-v1" if algo == "ppo" else "Pendulum-v1"
    config = Config(algo=algo, env_id=env_id, seed=0, num_envs=4, learning_starts=64,
                    batch_size=64)  # fmt: skip
    env = make_env(env_id, num_envs=4, seed=0)
    config = resolve_config(config, batched=True)
    agents = []
    for kit in ("torch", "lean"):
        torch.manual_seed(0)
        if kit == "torch":
            agent = agent_class(algo, env.spec)(env.spec, config, torch.device("cpu"))
            assert isinstance(agent.kit, TorchKit)
        else:
            agent = build_agent(algo, env.spec, config, torch.device("cpu"))
            assert all(isinstance(o, Adam) for o in agent.optimizers.values())
        env = make_env(env_id, num_envs=4, seed=0)
        agent.last_state = env.reset(seed=0)[0]
        for _ in range(3):
            agent.update_net(agent.explore_env(env, 32))
        agents.append(agent)
    for name, net in agents[0].nets.items():
        for a, b in zip(net.state_dict().values(), agents[1].nets[name].state_dict().values(),
                        strict=True):  # fmt: skip
            assert torch.equal(a, b), name
