"""DreamerV3 (`agents/dreamerv3.py`) and its building blocks (`core/world_models.py`): the
categorical latents, the GRU, the model along replayed windows, the losses against the paper's
written out here, acting with a recurrent state, a run's saved policy, learning CartPole."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from xiaoyarl import Config, ConfigError, load_policy, make_env, train_agent
from xiaoyarl.agents.dreamerv3 import AgentDreamerV3Discrete, DreamerV3Settings
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config_io import config_from_preset
from xiaoyarl.core.sequence_replay import MemoryTransitions
from xiaoyarl.core.world_models import (
    NormGRUCell,
    categorical_kl,
    dreamer_mlp,
    latent_probs,
    one_hot_latent,
    symlog,
)

SMALL = {"deter_dim": 16, "stoch": 4, "classes": 5, "batch_length": 8, "imagine_horizon": 4}


# --- building blocks ---
def test_latent_probabilities_mix_in_the_uniform_distribution():
    logits = torch.tensor([[50.0, 0.0, 0.0, 0.0] * 2])  # 2 variables of 4 classes
    probs = latent_probs(logits, 4, 0.01)
    assert probs.shape == (1, 2, 4)
    assert torch.allclose(probs.sum(-1), torch.ones(1, 2))
    assert probs.min().item() == pytest.approx(0.01 / 4)  # no class impossible
    assert probs[0, 0, 0].item() == pytest.approx(0.99 + 0.01 / 4)


def test_one_hot_latents_pass_gradients_straight_through():
    logits = torch.randn(3, 2 * 4, requires_grad=True)
    probs = latent_probs(logits, 4, 0.01)
    z = one_hot_latent(probs)
    assert z.shape == (3, 8)
    hard = z.detach().view(3, 2, 4).round()
    assert torch.allclose(z.detach().view(3, 2, 4), hard, atol=1e-6)  # one-hot (up to rounding)
    assert torch.equal(hard.sum(-1), torch.ones(3, 2)) and set(hard.unique().tolist()) <= {0, 1}
    weights = torch.randn(3, 8)
    (z * weights).sum().backward()
    again = latent_probs(logits, 4, 0.01)
    straight = torch.autograd.grad((again.flatten(-2) * weights).sum(), logits)[0]
    assert logits.grad is not None and torch.allclose(logits.grad, straight, atol=1e-6)
    greedy = one_hot_latent(probs.detach(), sample=False).view(3, 2, 4)
    assert torch.equal(greedy.argmax(-1), probs.argmax(-1))


def test_one_hot_samples_follow_the_probabilities():
    probs = torch.tensor([[[0.7, 0.2, 0.1]]]).expand(20_000, 1, 3)
    torch.manual_seed(0)
    freq = one_hot_latent(probs).mean(0)
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.015)


def test_categorical_kl_is_torchs_summed_over_the_variables():
    p = latent_probs(torch.randn(5, 12), 4, 0.01)
    q = latent_probs(torch.randn(5, 12), 4, 0.01)
    expected = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=p), torch.distributions.Categorical(probs=q)
    ).sum(-1)
    assert torch.allclose(categorical_kl(p, q), expected, atol=1e-6)
    assert torch.allclose(categorical_kl(p, p), torch.zeros(5), atol=1e-6)


def test_the_gru_cell_is_dreamers_written_out():
    torch.manual_seed(0)
    cell = NormGRUCell(3, 4)
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    parts = F.layer_norm(torch.cat([x, h], -1) @ cell.linear.weight.T, (12,),
                         cell.norm.weight, cell.norm.bias)  # fmt: skip
    reset, cand, update = parts[:, :4], parts[:, 4:8], parts[:, 8:]
    reset = torch.sigmoid(reset)
    cand = torch.tanh(reset * cand)
    update = torch.sigmoid(update - 1)
    assert torch.allclose(cell(x, h), update * cand + (1 - update) * h, atol=1e-6)


def test_dreamer_mlp_layers_and_a_head_that_starts_at_zero():
    net = dreamer_mlp([6, 8, 8], 3, zero_out=True)
    kinds = [type(m).__name__ for m in net]
    assert kinds == ["Linear", "LayerNorm", "SiLU"] * 2 + ["Linear"]
    assert net[0].bias is None and torch.equal(net(torch.randn(4, 6)), torch.zeros(4, 3))


# --- the agent ---
def make_agent(env_id: str = "CartPole-v1", num_envs: int = 2, **settings):
    config = Config(algo="dreamerv3", env_id=env_id, num_envs=num_envs, net_dims=[16],
                    batch_size=3 * SMALL["batch_length"],
                    world_model={**SMALL, **settings})  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env(env_id, num_envs, seed=0)
    torch.manual_seed(0)
    from xiaoyarl.agents.registry import make_agent as build

    return build("dreamerv3", env.spec, config, torch.device("cpu")), env


def fill(agent, steps: int = 40) -> None:
    """Random CartPole-like steps into the replay, sub-env 0's episode ending at step 20."""
    n = agent.spec.num_envs
    g = torch.Generator().manual_seed(3)
    terminals = torch.zeros(steps, n, dtype=torch.bool)
    terminals[20, 0] = True
    agent.buffer.add(MemoryTransitions(
        states=torch.randn(steps, n, 4, generator=g),
        actions=torch.randint(2, (steps, n), generator=g),
        rewards=torch.ones(steps, n), terminals=terminals,
        truncates=torch.zeros(steps, n, dtype=torch.bool),
        next_states=torch.randn(steps, n, 4, generator=g), hiddens=torch.zeros(steps, n, 0),
    ))  # fmt: skip


def test_settings_are_checked_naming_what_is_wrong():
    with pytest.raises(ConfigError, match="no setting horizon"):
        resolve_config(Config(algo="dreamerv3", world_model={"horizon": 5}), batched=True)
    with pytest.raises(ConfigError, match="batch_length >= 2"):
        resolve_config(Config(algo="dreamerv3", world_model={"batch_length": 1}), batched=True)
    with pytest.raises(ConfigError, match="recurrent already"):
        resolve_config(Config(algo="dreamerv3", recurrent="gru"), batched=True)
    with pytest.raises(ConfigError, match="per=True"):
        resolve_config(Config(algo="dreamerv3", per=True), batched=True)
    assert DreamerV3Settings.of(Config(algo="dreamerv3")) == DreamerV3Settings()  # the paper's
    config = resolve_config(config_from_preset("dreamerv3", "MinAtar/Breakout-v1"), batched=True)
    assert (config.gamma, config.batch_size, config.net_dims) == (0.997, 16 * 64, [256])


def test_acting_carries_each_sub_envs_state_and_restarts_it_with_an_episode():
    agent, env = make_agent()
    assert isinstance(agent, AgentDreamerV3Discrete)
    model = agent.model
    state = torch.randn(2, 4)
    agent.starts = torch.tensor([True, True])
    action = agent.explore_action(state)
    assert action.shape == (2,) and action.dtype == torch.int64
    first = agent.hidden.clone()
    assert first.shape == (2, 16) and first.abs().sum() > 0
    agent.starts = torch.tensor([False, True])  # sub-env 1 begins an episode
    agent.explore_action(state)
    with model.context(torch.zeros(2, 16), torch.zeros(1, 2, dtype=torch.bool)):
        torch.manual_seed(1)
        model.sample(state)  # from a zero state
    restarted = model.hiddens[0]
    with model.context(first, torch.zeros(1, 2, dtype=torch.bool)):
        torch.manual_seed(1)
        model.sample(state)  # continued
    continued = model.hiddens[0]
    assert not torch.allclose(restarted[0], continued[0])
    with pytest.raises(RuntimeError, match="context"):
        model(state)
    with (
        pytest.raises(ValueError, match="one step"),
        model.context(first, torch.zeros(2, 2).bool()),
    ):
        model(state)


def test_a_windows_episode_start_restarts_the_model():
    """The model's states after an episode begins inside a window do not depend on the steps
    before it (it restarts from a zero state and the new episode's own observation)."""
    agent, _ = make_agent()
    fill(agent)
    torch.manual_seed(0)
    windows = agent.sample_batch()
    steps = SMALL["batch_length"]
    starts = windows.starts
    found = [(t, b) for t in range(1, steps) for b in range(starts.shape[1]) if starts[t, b]]
    while not found:
        windows = agent.sample_batch()
        starts = windows.starts
        found = [(t, b) for t in range(1, steps) for b in range(starts.shape[1]) if starts[t, b]]
    t0, b = found[0]
    torch.manual_seed(7)
    out = agent.model.observe(windows)
    states = windows.states.clone().view(steps, -1, 4)
    states[:t0, b] += 5.0  # what came before the episode began
    next_states = windows.next_states.clone().view(steps, -1, 4)
    next_states[: t0 - 1, b] += 5.0
    changed = windows._replace(states=states.flatten(0, 1), next_states=next_states.flatten(0, 1))
    torch.manual_seed(7)
    again = agent.model.observe(changed)
    assert torch.allclose(out["post"][t0:, b], again["post"][t0:, b], atol=1e-6)
    assert not torch.allclose(out["post"][: t0 - 1, b], again["post"][: t0 - 1, b])
    assert out["fresh"][0].all() and out["fresh"][t0, b]


def test_lambda_returns_and_the_losses_are_the_papers_written_out():
    """A gradient step's logged world-model loss and the actor's and critic's losses, against
    DreamerV3's written out here from the same batch and the same random draws."""
    agent, _ = make_agent()
    fill(agent)
    model, s, gamma = agent.model, agent.settings, agent.config.gamma
    torch.manual_seed(5)
    windows = agent.sample_batch()
    torch.manual_seed(6)
    loss, logs, (h, z, cont0) = agent.world_model_loss(windows)
    torch.manual_seed(6)
    out = model.observe(windows)
    steps, batch = out["fresh"].shape
    # the world model: prediction losses + KL terms with free bits, over the reached states and
    # the states where windows and episodes begin

    def kl(p, q):
        return (p * (p / q).log()).sum((-2, -1))

    def kl_terms(post, prior):
        dyn = torch.clamp(kl(post.detach(), prior), min=s.free_nats)
        rep = torch.clamp(kl(post, prior.detach()), min=s.free_nats)
        return 0.5 * dyn + 0.1 * rep

    support = torch.linspace(-20, 20, 255)
    next_obs = windows.next_states.view(steps, batch, -1)
    recon = ((model.decoder(out["feat"]) - symlog(next_obs)) ** 2).sum(-1)
    reward_logits = model.reward(out["feat"])
    x = symlog(windows.rewards.view(steps, batch)).clamp(-20, 20)
    below = ((x + 20) / (40 / 254)).floor().clamp(0, 253).long()
    frac = (x - support[below]) / (40 / 254)
    target = F.one_hot(below, 255) * (1 - frac).unsqueeze(-1) + F.one_hot(below + 1, 255) * (
        frac.unsqueeze(-1)
    )
    reward = -(target * reward_logits.log_softmax(-1)).sum(-1)
    cont = 1 - windows.terminals.view(steps, batch).float()
    cont_logit = model.cont(out["feat"]).squeeze(-1)
    cont_loss = -(cont * F.logsigmoid(cont_logit) + (1 - cont) * F.logsigmoid(-cont_logit))
    per_step = recon + reward + cont_loss + kl_terms(out["post"], out["prior"])
    fresh = out["fresh"].float()
    first_obs = windows.states.view(steps, batch, -1)
    recon_fresh = ((model.decoder(out["fresh_feat"]) - symlog(first_obs)) ** 2).sum(-1)
    fresh_terms = (recon_fresh + kl_terms(out["fresh_post"], out["fresh_prior"])) * fresh
    expected = (per_step.sum() + fresh_terms.sum()) / (steps * batch + fresh.sum())
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert logs["model_loss"].item() == pytest.approx(expected.item(), rel=1e-5)

    # imagination: lambda-returns, the return scale, REINFORCE and the critic's two losses
    scale_before = agent.return_scale.value.clone()
    torch.manual_seed(8)
    actor_loss, critic_loss, _ = agent.actor_critic_losses(h, z, cont0)
    torch.manual_seed(8)
    with torch.no_grad():
        feats, actions, hh, zz = [torch.cat([h, z], -1)], [], h, z
        for _ in range(s.imagine_horizon):
            probs = 0.99 * model.policy(feats[-1]).softmax(-1) + 0.01 / 2
            a = torch.multinomial(probs, 1).squeeze(-1)
            actions.append(a)
            hh = model.gru(model.img_in(torch.cat([zz, F.one_hot(a, 2).float()], -1)), hh)
            zz = one_hot_latent(model.probs(model.prior(hh)))
            feats.append(torch.cat([hh, zz], -1))
        feat = torch.stack(feats)

        def value(logits):
            return torch.sign(v := (logits.softmax(-1) * support).sum(-1)) * torch.expm1(v.abs())

        r = value(model.reward(feat[1:]))
        c = (model.cont(feat[1:]).squeeze(-1) > 0).float()
        v = value(agent.critic(feat))
        returns = torch.zeros_like(r)
        last = v[-1]
        for t in reversed(range(s.imagine_horizon)):
            last = r[t] + gamma * c[t] * ((1 - s.return_lambda) * v[t + 1] + s.return_lambda * last)
            returns[t] = last
        weights = torch.cumprod(torch.cat([cont0[None], gamma * c[:-1]]), 0)
        flat = returns.flatten().sort().values
        spread = (torch.quantile(flat, 0.95) - torch.quantile(flat, 0.05)).clamp(min=1)
        scale = scale_before + s.return_scale_tau * (spread - scale_before)
        advantage = (returns - v[:-1]) / scale
        slow = value(agent.slow_critic(feat[:-1]))
    probs = 0.99 * model.policy(feat[:-1]).softmax(-1) + 0.01 / 2
    logp = probs.log().gather(-1, torch.stack(actions).unsqueeze(-1)).squeeze(-1)
    entropy = -(probs * probs.log()).sum(-1)
    expected_actor = -(weights * (logp * advantage + 3e-4 * entropy)).mean()
    logits = agent.critic(feat[:-1]).log_softmax(-1)

    def two_hot_ce(x):
        y = symlog(x).clamp(-20, 20)
        lo = ((y + 20) / (40 / 254)).floor().clamp(0, 253).long()
        f = (y - support[lo]) / (40 / 254)
        tgt = F.one_hot(lo, 255) * (1 - f).unsqueeze(-1) + F.one_hot(lo + 1, 255) * f.unsqueeze(-1)
        return -(tgt * logits).sum(-1)

    expected_critic = (weights * (two_hot_ce(returns) + two_hot_ce(slow))).mean()
    assert agent.return_scale.value.item() == pytest.approx(scale.item(), rel=1e-5)
    assert actor_loss.item() == pytest.approx(expected_actor.item(), rel=1e-4, abs=1e-7)
    assert critic_loss.item() == pytest.approx(expected_critic.item(), rel=1e-5)


def test_a_gradient_step_moves_every_network_and_the_slow_critic_by_its_fraction():
    agent, _ = make_agent()
    fill(agent)
    before = {name: [p.detach().clone() for p in net.parameters()]
              for name, net in agent.nets.items() if name != "return_scale"}  # fmt: skip
    agent.gradient_step(agent.sample_batch())
    for name, params in before.items():
        now = list(agent.nets[name].parameters())
        moved = sum(not torch.equal(a, b) for a, b in zip(params, now, strict=True))
        assert moved > 0, name
    tau = agent.settings.slow_critic_tau
    for slow, slow_before, critic in zip(agent.slow_critic.parameters(), before["slow_critic"],
                                         agent.critic.parameters(), strict=True):  # fmt: skip
        assert torch.allclose(slow, slow_before + tau * (critic - slow_before), atol=1e-6)
    policy_lr = agent.optimizers["actor"].param_groups[0]["lr"]
    assert policy_lr == pytest.approx(0.3 * agent.config.learning_rate)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_a_run_saves_a_recurrent_policy_that_acts_and_exports(tmp_path, env_id):
    """Discrete and continuous actions: a short run; its saved policy keeps each episode's
    state (`step` returns it), acts within the env's actions, and exports to TorchScript."""
    config = Config(algo="dreamerv3", env_id=env_id, max_steps=256, learning_starts=64,
                    eval_every=128, eval_episodes=2, net_dims=[16], batch_size=32,
                    world_model=SMALL, cwd=str(tmp_path / "run"), threads=1)  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["updates"] > 0 and np.isfinite(summary["final_eval_mean"])
    policy = load_policy(tmp_path / "run")
    assert policy.recurrent
    obs = np.zeros((3, *policy.obs_shape), np.float32)
    action, state = policy.step(obs)
    assert state.shape == (3, SMALL["deter_dim"]) and np.abs(state).sum() > 0
    action2, state2 = policy.step(obs, state, np.array([True, False, False]))
    assert np.allclose(state2[1], state2[2]) and not np.allclose(state2[0], state2[1])
    if env_id == "Pendulum-v1":
        assert action.shape == (3, 1) and np.all(np.abs(action2) <= 2.0)
    else:
        assert action.shape == (3,) and set(np.unique(action2)) <= {0, 1}
    from xiaoyarl.export import export_policy

    path = export_policy(tmp_path / "run", tmp_path / "policy.pt", fmt="torchscript")
    deployed = torch.jit.load(str(path))
    out = deployed(torch.zeros(3, *policy.obs_shape), torch.zeros(3, SMALL["deter_dim"]),
                   torch.ones(3, dtype=torch.bool))  # fmt: skip
    assert out[-1].shape == (3, SMALL["deter_dim"])


def test_discrete_and_continuous_agents_are_refused_where_they_cannot_act():
    with pytest.raises(ConfigError, match="dreamerv3"):
        train_agent(Config(algo="dreamerv3", env_id="action_envs:PickAllowed-v0"), log=None)


@pytest.mark.learning
@pytest.mark.timeout(900)
def test_dreamerv3_learns_cartpole(tmp_path):
    """The CartPole preset (a smaller model for a CPU) past 300 within 5,000 env steps (a run of
    seed 0 evaluated 433 at 3,000; BENCHMARKS.md's three seeds solve at 3,000 to 20,000); stops
    once 300 is confirmed."""
    config = dataclasses.replace(config_from_preset("dreamerv3", "CartPole-v1"), max_steps=5_000,
                                 target_return=300, cwd=str(tmp_path / "run"), threads=1,
                                 seed=0)  # fmt: skip
    summary = train_agent(config, log=None)
    assert summary["best_eval_mean"] >= 300, summary
    assert math.isfinite(summary["final_eval_mean"])


@pytest.mark.cuda
def test_graphed_dreamerv3_steps_equal_eager_steps(graphed_replays_equal_eager):
    """On a GPU the update is captured as CUDA graphs (its inputs flat tensors, `Windows`; the
    latents drawn on the device, the return scale's percentiles read no value back): the same
    steps as eager ones."""
    from xiaoyarl.agents.registry import make_agent as build
    from xiaoyarl.core.graphs import capture_updates

    agents = []
    for graphed in (True, False):
        config = Config(algo="dreamerv3", env_id="CartPole-v1", num_envs=2, net_dims=[16],
                        batch_size=3 * SMALL["batch_length"], world_model=SMALL,
                        cuda_graph=graphed)  # fmt: skip
        config = resolve_config(config, batched=True, device_type="cuda")
        env = make_env("CartPole-v1", 2, device="cuda", seed=0)
        torch.manual_seed(0)
        agent = build("dreamerv3", env.spec, config, torch.device("cuda"))
        assert capture_updates(agent) == graphed
        fill(agent)
        agents.append(agent)
    graphed_replays_equal_eager(*agents)
