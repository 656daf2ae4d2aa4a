"""The H-term add-on, piece by piece against slow reference loops: trajectories assembled
across rollouts, ranking and dropping, reward normalisation, windows that stay inside one
trajectory, the objective's window sums; then its place in the agents, its checkpoint, and
the averaged-critic target."""

import math
from types import SimpleNamespace

import pytest
import torch

from xiaoyarl import Config
from xiaoyarl.agents import make_agent as build_agent
from xiaoyarl.agents.hterm import HTerm
from xiaoyarl.agents.settings import check_config, resolve_config
from xiaoyarl.envs import make_env
from xiaoyarl.errors import ConfigError


def h_config(**overrides) -> Config:
    fields = dict(algo="sac", env_id="Pendulum-v1", batch_size=64, h_term=True, h_term_k=3,
                  h_term_gamma=0.8, h_term_drop=0.25, h_term_start=1)  # fmt: skip
    return Config(**{**fields, **overrides})


def random_rollouts(num_rollouts=6, horizon=7, num_envs=3, seed=0, end_rate=0.15):
    """Rollouts `(T, N, ...)` with episode ends at random steps; states hold (rollout, t, env)
    so that every stored step can be traced back."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for r in range(num_rollouts):
        t = torch.arange(horizon).view(-1, 1, 1).expand(horizon, num_envs, 1)
        e = torch.arange(num_envs).view(1, -1, 1).expand(horizon, num_envs, 1)
        states = torch.cat([torch.full_like(t, r), t, e], -1).float()
        actions = torch.rand((horizon, num_envs, 2), generator=gen) * 2 - 1
        rewards = torch.randn((horizon, num_envs), generator=gen)
        dones = torch.rand((horizon, num_envs), generator=gen) < end_rate
        out.append((states, actions, rewards, dones))
    return out


def reference_trajectories(rollouts):
    """Whole episodes, in the order they end (by rollout, then env, then step), by walking
    every sub-env step by step."""
    num_envs = rollouts[0][2].shape[1]
    open_steps = [[] for _ in range(num_envs)]
    done = []
    for states, actions, rewards, dones in rollouts:
        ended = []
        for env in range(num_envs):
            for t in range(rewards.shape[0]):
                open_steps[env].append((states[t, env], actions[t, env], rewards[t, env]))
                if dones[t, env]:
                    ended.append(open_steps[env])
                    open_steps[env] = []
        done += ended
    return done


def test_trajectories_are_whole_episodes_across_rollouts():
    h = HTerm(h_config(h_term_drop=0.0), torch.device("cpu"))
    rollouts = random_rollouts()
    for rollout in rollouts:
        h.add(*rollout)
    expected = reference_trajectories(rollouts)
    assert len(h.trajectories) == len(expected) > 5
    assert any(r.shape[0] > 7 for _, _, r in h.trajectories)  # some span several rollouts
    for (states, actions, rewards), steps in zip(h.trajectories, expected, strict=True):
        assert torch.equal(states, torch.stack([s for s, _, _ in steps]))
        assert torch.equal(actions, torch.stack([a for _, a, _ in steps]))
        assert torch.equal(rewards, torch.stack([r for _, _, r in steps]))
    # only the blocks that open episodes still start in are held
    assert len(h.blocks) <= 6


def test_lowest_returns_are_dropped_and_rewards_normalised_over_the_rest():
    h = HTerm(h_config(h_term_drop=0.25), torch.device("cpu"))
    for rollout in random_rollouts(seed=1):
        h.add(*rollout)
    returns = [r.sum().item() for _, _, r in h.trajectories]
    n_drop = int(len(returns) * 0.25)
    dropped = sorted(range(len(returns)), key=lambda i: returns[i])[:n_drop]
    kept = [i for i in range(len(returns)) if i not in dropped]
    assert h.kept() == kept
    assert min(returns[i] for i in kept) >= max(returns[i] for i in dropped)
    rewards = torch.cat([h.trajectories[i][2] for i in kept])
    expected = (rewards - rewards.min()) / (rewards.max() - rewards.min())
    assert torch.allclose(h.r_norm, expected)
    assert h.r_norm.min() == 0 and h.r_norm.max() == 1
    assert h.kept_states == rewards.shape[0]


def test_windows_stay_inside_one_trajectory():
    h = HTerm(h_config(h_term_drop=0.0), torch.device("cpu"))
    for rollout in random_rollouts(seed=2):
        h.add(*rollout)
    index = h.sample(2000)
    states = h.states[index]  # (W, K, 3): rollout, t, env
    # consecutive steps of one sub-env: the same env, and (rollout, t) advancing by one step
    assert (states[:, :, 2] == states[:, :1, 2]).all()
    step = states[:, :, 0] * 7 + states[:, :, 1]
    assert (step.diff(dim=1) == 1).all()
    # every possible window start is drawn
    assert torch.unique(index[:, 0]).numel() == h.starts.numel()


def test_objective_equals_the_formula_written_as_loops():
    h = HTerm(h_config(h_term_drop=0.0, h_term_k=4), torch.device("cpu"))
    for rollout in random_rollouts(seed=3, horizon=9):
        h.add(*rollout)
    index = h.sample(50)

    def logprob(states, actions):  # any differentiable function of (s, a) will do
        return -(actions - 0.1 * states[:, 1:2]).square().sum(-1) * 3.0

    got = h.objective(logprob, index)
    total = 0.0
    for window in index.tolist():
        cumulative, value = 0.0, 0.0
        for k, i in enumerate(window, start=1):
            cumulative += logprob(h.states[i : i + 1], h.actions[i : i + 1]).item()
            value += 0.8**k * h.r_norm[i].item() * min(max(cumulative, -16.0), 2.0)
        total += value
    assert got.item() == pytest.approx(total / len(index), rel=1e-5)


def test_inactive_until_enough_kept_states():
    h = HTerm(h_config(h_term_start=10_000), torch.device("cpu"))
    for rollout in random_rollouts():
        h.add(*rollout)
    assert not h.active
    agent = SimpleNamespace(explore_logprob=lambda s, a: a.sum(-1))
    loss, log = h.loss(agent.explore_logprob)
    assert loss == 0.0 and log["h_term"].isnan()


def test_checkpoint_round_trip():
    rollouts = random_rollouts(seed=4)
    h = HTerm(h_config(), torch.device("cpu"))
    for rollout in rollouts[:3]:
        h.add(*rollout)
    h.sample(10)  # the windows' generator has moved on from its seed
    copy = HTerm(h_config(), torch.device("cpu"))
    copy.load_state_dict(h.state_dict())
    for rollout in rollouts[3:]:
        h.add(*rollout)
        copy.add(*rollout)
    assert torch.equal(h.states, copy.states) and torch.equal(h.r_norm, copy.r_norm)
    assert torch.equal(h.starts, copy.starts)
    assert torch.equal(h.sample(50), copy.sample(50))  # it goes on drawing the same windows


def test_windows_come_from_a_generator_of_its_own():
    """Drawing windows leaves torch's global generator (which several learners share for their
    update) where it was; the generator follows the run's seed; a checkpoint written before
    it was saved still loads."""
    rollouts = random_rollouts(seed=5)
    h = HTerm(h_config(), torch.device("cpu"))
    other_seed = HTerm(h_config(seed=1), torch.device("cpu"))
    for rollout in rollouts:
        h.add(*rollout)
        other_seed.add(*rollout)
    before = torch.get_rng_state()
    index = h.sample(100)
    assert torch.equal(torch.get_rng_state(), before)
    assert not torch.equal(index, other_seed.sample(100))
    old = h.state_dict()
    del old["generator"]
    restored = HTerm(h_config(), torch.device("cpu"))
    restored.load_state_dict(old)
    assert torch.equal(restored.sample(100), index)  # from the seed again


@pytest.mark.parametrize("algo", ["ppo", "ddpg", "td3", "sac"])
def test_the_actor_gets_the_h_term_gradient_once_active(algo):
    env = make_env("Pendulum-v1", 4, seed=0)
    fields = dict(algo=algo, env_id="Pendulum-v1", batch_size=32, horizon_len=64, num_envs=4,
                  learning_starts=0, h_term=True, h_term_start=100)  # fmt: skip
    config = resolve_config(Config(**fields), batched=True)
    agent = build_agent(algo, env.spec, config, torch.device("cpu"))
    agent.last_state = agent.observe(*env.reset(seed=0))
    rollout = agent.explore_env(env, 64)
    agent.observe_auxiliary(rollout)
    loss, log = agent.auxiliary_loss()  # no episode has ended yet
    assert loss == 0.0 and log["h_term"].isnan()
    for _ in range(3):  # 256 steps: the 200-step episodes end, the H-term starts
        agent.observe_auxiliary(agent.explore_env(env, 64))
    h_term = agent.auxiliary
    assert h_term.active and h_term.kept_states == 4 * 200  # 1/8 of 4: none dropped
    loss, log = agent.auxiliary_loss()
    assert math.isfinite(log["h_term"].item())
    assert loss.item() == pytest.approx(-config.h_term_lambda * log["h_term"].item())
    agent.actor.zero_grad()
    loss.backward()
    grads = [p.grad for p in agent.actor.parameters() if p.grad is not None]
    assert grads and sum(g.abs().sum() for g in grads) > 0


def test_h_term_is_refused_where_there_is_no_policy_log_probability():
    with pytest.raises(ConfigError, match="h_term=True does not apply to dqn"):
        check_config(Config(algo="dqn", env_id="CartPole-v1", h_term=True))
    with pytest.raises(ConfigError, match="h_term_drop"):
        check_config(Config(algo="sac", env_id="Pendulum-v1", h_term_drop=1.0))


def test_sac_logprob_of_its_own_samples():
    env = make_env("Pendulum-v1", 1)
    config = resolve_config(Config(algo="sac", env_id="Pendulum-v1"), batched=True)
    agent = build_agent("sac", env.spec, config, torch.device("cpu"))
    states = torch.randn(256, 3)
    torch.manual_seed(0)
    actions, logprob = agent.actor.get_action_logprob(states)
    assert torch.allclose(agent.actor.logprob(states, actions), logprob, atol=1e-3)


@pytest.mark.parametrize("reduce, expected", [("min", [1.0, -2.0]), ("mean", [2.0, 0.0])])
def test_target_critics_combined_by_min_or_mean(reduce, expected):
    env = make_env("Pendulum-v1", 1)
    config = Config(algo="td3", env_id="Pendulum-v1", num_critics=3, target_q_reduce=reduce)
    agent = build_agent("td3", env.spec, resolve_config(config, True), torch.device("cpu"))
    q = torch.tensor([[1.0, 2.0], [2.0, -2.0], [3.0, 0.0]])  # (num_critics, B)
    assert agent.reduce_target_q(q).tolist() == expected
