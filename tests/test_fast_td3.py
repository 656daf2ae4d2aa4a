"""FastTD3 and FastSAC (`agents/fast_td3.py`) and the options they bring to the off-policy
actor-critics: C51 distributional critics (`core/distributional.py`), each sub-env's own
exploration noise, and the algorithm presets. Losses against references written the obvious
way, shapes, bad input, smoke runs through each runner; the learning test is in
test_learning.py (slow)."""

import json

import pytest
import torch

from xiaoyarl import Config, ConfigError, make_env, train_agent
from xiaoyarl.agents import AgentDDPG, AgentREDQ, AgentSAC, AgentTD3
from xiaoyarl.agents.settings import check_config, ignored_fields, resolve_config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.distributional import DistributionalCriticEnsemble, categorical_projection
from xiaoyarl.presets import CONFIG_DIR, preset_path
from xiaoyarl.run import agent_class

ALGO_OF = {AgentDDPG: "ddpg", AgentTD3: "td3", AgentSAC: "sac", AgentREDQ: "redq"}
C51 = {"critic_atoms": 11, "critic_v_min": -5.0, "critic_v_max": 5.0}


def make_agent(cls, num_envs=4, **overrides):
    values = {"net_dims": [32, 32], "buffer_size": 4096, "learning_starts": 16, "batch_size": 8}
    config = Config(algo=ALGO_OF[cls], env_id="Pendulum-v1", num_envs=num_envs,
                    **{**values, **overrides})  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env("Pendulum-v1", num_envs, seed=0)
    torch.manual_seed(0)
    return cls(env.spec, config, torch.device("cpu")), env


def dense_projection(atoms, probs, support):
    """The C51 projection the obvious way: support point j gets, from every atom, its
    probability times max(0, 1 - |z - z_j| / spacing), z clipped to the support's range."""
    spacing = (support[-1] - support[0]) / (len(support) - 1)
    out = torch.zeros(atoms.shape[0], len(support))
    for b in range(atoms.shape[0]):
        for k in range(atoms.shape[1]):
            z = atoms[b, k].clamp(support[0], support[-1])
            for j in range(len(support)):
                out[b, j] += probs[b, k] * max(0.0, 1 - abs(z - support[j]) / spacing)
    return out


def test_projection_matches_the_dense_reference_and_keeps_mass_and_mean():
    g = torch.Generator().manual_seed(0)
    support = torch.linspace(-5, 5, 11)
    atoms = torch.randn(6, 11, generator=g) * 4
    atoms[0] = support  # exactly on the support points
    atoms[1, :3] = torch.tensor([5.0, -5.0, 40.0])  # both ends, and beyond them
    atoms[2] = support + 0.5  # halfway between points
    probs = torch.rand(6, 11, generator=g).softmax(-1)
    got = categorical_projection(atoms, probs, support)
    torch.testing.assert_close(got, dense_projection(atoms, probs, support))
    torch.testing.assert_close(got.sum(-1), probs.sum(-1))
    # linear interpolation keeps the mean of the (clipped) distribution
    torch.testing.assert_close((got * support).sum(-1),
                               (probs * atoms.clamp(-5, 5)).sum(-1))  # fmt: skip


def batch_for(agent, size=6):
    g = torch.Generator().manual_seed(1)
    return Batch(
        states=torch.randn(size, 3, generator=g), actions=torch.rand(size, 1, generator=g) * 2 - 1,
        rewards=torch.randn(size, generator=g), terminals=torch.tensor([True, False] * (size // 2)),
        next_states=torch.randn(size, 3, generator=g),
        indices=torch.arange(size), weights=torch.rand(size, generator=g),
        discounts=torch.full((size,), agent.config.gamma ** 3),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "fields"),
    [(AgentDDPG, {}), (AgentTD3, {"policy_noise_std": 0.0}),
     (AgentTD3, {"policy_noise_std": 0.0, "target_q_reduce": "mean"}), (AgentSAC, {}),
     (AgentREDQ, {"num_critics": 3, "redq_subset": 3})],
)  # fmt: skip
def test_distributional_critic_loss_matches_a_reference(cls, fields):
    """C51's loss, written out sample by sample: the target critics' distributions of the next
    state-action (the one of least mean, or their mixture), each atom moved to
    r + gamma^m * (z - SAC's entropy term) unless terminal, projected back; the cross-entropy
    of each critic against it, weighted, averaged over the batch, summed over critics."""
    agent, _ = make_agent(cls, **C51, **fields)
    assert isinstance(agent.critic, DistributionalCriticEnsemble)
    batch = batch_for(agent)
    torch.manual_seed(3)
    loss, q, td_errors = agent.critic_loss(batch)
    torch.manual_seed(3)
    support = agent.critic.support
    with torch.no_grad():
        if cls in (AgentSAC, AgentREDQ):
            action, logprob = agent.actor.get_action_logprob(batch.next_states)
            penalty = agent.temperature() * logprob
        else:
            action = agent.actor_target(batch.next_states)
            penalty = torch.zeros(6)
        next_probs = agent.critic_target.logits(batch.next_states, action).softmax(-1)
    logits = agent.critic.logits(batch.states, batch.actions)
    want = 0.0
    for b in range(6):
        means = [(next_probs[c, b] * support).sum() for c in range(len(next_probs))]
        if fields.get("target_q_reduce") == "mean":
            chosen = next_probs[:, b].mean(0)
        else:
            chosen = next_probs[min(range(len(means)), key=lambda c: means[c]), b]
        keep = 0.0 if batch.terminals[b] else batch.discounts[b]
        atoms = batch.rewards[b] + keep * (support - penalty[b])
        target = dense_projection(atoms.view(1, -1), chosen.view(1, -1), support)[0]
        for c in range(len(logits)):
            cross_entropy = -(target * logits[c, b].log_softmax(-1)).sum()
            want = want + batch.weights[b] * cross_entropy / 6
    torch.testing.assert_close(loss, want)
    assert q.shape == td_errors.shape == (agent.config.num_critics, 6)
    torch.testing.assert_close(q, agent.critic(batch.states, batch.actions).detach())


@pytest.mark.parametrize("algo", ["dqn", "double_dqn", "d3qn"])
def test_distributional_dqn_loss_matches_a_reference(algo):
    """C51 for the DQN family, sample by sample: the next action chosen by the target network's
    means (DQN) or the online network's (Double DQN, D3QN), the target network's distribution
    for it moved to r + gamma^m * z unless terminal and projected; the cross-entropy of the
    taken action's distribution against it, weighted, averaged."""
    config = resolve_config(Config(algo=algo, env_id="CartPole-v1", num_envs=4, net_dims=[32, 32],
                                   buffer_size=512, **C51), batched=True)  # fmt: skip
    env = make_env("CartPole-v1", 4, seed=0)
    torch.manual_seed(0)
    agent = agent_class(algo, env.spec)(env.spec, config, torch.device("cpu"))
    with torch.no_grad():  # a target network that differs from the online one
        for p in agent.qnet_target.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    g = torch.Generator().manual_seed(1)
    batch = Batch(
        states=torch.randn(6, 4, generator=g), actions=torch.randint(2, (6,), generator=g),
        rewards=torch.randn(6, generator=g), terminals=torch.tensor([True, False] * 3),
        next_states=torch.randn(6, 4, generator=g), indices=torch.arange(6),
        weights=torch.rand(6, generator=g), discounts=torch.full((6,), 0.99 ** 2),
    )  # fmt: skip
    support = agent.qnet.support
    with torch.no_grad():
        chooser = agent.qnet_target if algo == "dqn" else agent.qnet
        best = chooser.q_values(batch.next_states).argmax(-1)
        next_probs = agent.qnet_target.logits(batch.next_states).softmax(-1)
        logits = agent.qnet.logits(batch.states)
    want = 0.0
    for b in range(6):
        keep = 0.0 if batch.terminals[b] else batch.discounts[b]
        atoms = batch.rewards[b] + keep * support
        target = dense_projection(atoms.view(1, -1), next_probs[b, best[b]].view(1, -1), support)
        cross_entropy = -(target[0] * logits[b, batch.actions[b]].log_softmax(-1)).sum()
        want = want + batch.weights[b] * cross_entropy / 6
    logs, td_errors = agent.update_step(batch)
    torch.testing.assert_close(logs["critic_loss"], want)
    assert td_errors.shape == (6,)
    assert agent.qnet.q_values(batch.states).shape == (6, 2)
    assert agent.act(batch.states).shape == (6,)


def test_distributional_td3_takes_gradient_steps_and_acts():
    agent, env = make_agent(AgentTD3, **C51)
    state, _ = env.reset(seed=0)
    agent.last_state = state
    for _ in range(8):
        rollout = agent.explore_env(env, 4)
        logs = agent.update_net(rollout)
    assert {"critic_loss", "q_value", "actor_loss"} <= set(logs)
    assert all(torch.isfinite(v) for v in logs.values())
    assert agent.act(state).shape == (4, 1)


def test_ornstein_uhlenbeck_noise_follows_its_recursion_and_restarts_with_the_episode():
    """`explore_noise: ou`: each sub-env's noise is x <- (1 - theta dt) x + std sqrt(dt) N(0, 1)
    from 0, reset to 0 where an episode ends (terminal or truncated), correlated in time, and
    carried by a checkpoint; TD3 and DDPG take it."""
    from xiaoyarl.agents.noise import OU_DT

    for cls in (AgentTD3, AgentDDPG):
        agent, _ = make_agent(cls, explore_noise="ou", explore_noise_std=0.5)
        state = torch.randn(4, 3)
        with torch.no_grad():
            greedy = agent.actor(state)
        torch.manual_seed(3)
        draws = [torch.randn(4, 1) for _ in range(3)]
        torch.manual_seed(3)
        want = torch.zeros(4, 1)
        for draw in draws:
            action = agent.explore_action(state)
            want = (1 - 0.15 * OU_DT) * want + 0.5 * OU_DT**0.5 * draw
            torch.testing.assert_close(agent.noise.ou_noise, want)
            torch.testing.assert_close(action, (greedy + want).clamp(-1, 1))
        ended = torch.tensor([False, True, False, False])
        agent.record((state, action), torch.zeros(4), torch.zeros(4, dtype=torch.bool), ended,
                     {"final_state": state})  # fmt: skip
        assert agent.noise.ou_noise[1].item() == 0.0
        assert torch.equal(agent.noise.ou_noise[[0, 2, 3]], want[[0, 2, 3]])
        fresh, _ = make_agent(cls, explore_noise="ou", explore_noise_std=0.5)
        fresh.load_state_dict(agent.state_dict())
        assert torch.equal(fresh.noise.ou_noise, agent.noise.ou_noise)
    # correlated in time: a lag-1 autocorrelation near 1, where independent noise has none
    agent, _ = make_agent(AgentTD3, num_envs=256, explore_noise="ou", explore_noise_std=0.5)
    torch.manual_seed(0)
    series = [agent.noise(torch.zeros(256, 1)).clone() for _ in range(200)]
    x = torch.stack(series[100:])
    lag1 = torch.corrcoef(torch.stack([x[:-1].flatten(), x[1:].flatten()]))[0, 1].item()
    assert lag1 > 0.95
    # PPO does not read the field (reported as ignored); SAC explores by sampling its own
    # policy, so OU noise is refused there (it takes gsde instead: test_gsde.py)
    assert ignored_fields(Config(algo="ppo", env_id="Pendulum-v1", explore_noise="ou")) == [
        "explore_noise"
    ]
    refused = "ou.* does not apply to sac, which explores with gaussian or gsde"
    with pytest.raises(ConfigError, match=refused):
        check_config(Config(algo="sac", env_id="Pendulum-v1", explore_noise="ou"))
    with pytest.raises(ConfigError, match="explore_noise"):
        check_config(Config(algo="td3", env_id="Pendulum-v1", explore_noise="pink"))


def test_each_sub_env_keeps_its_noise_std_until_its_episode_ends():
    agent, _ = make_agent(AgentTD3, explore_noise_std=0.1, explore_noise_std_max=0.5)
    state = torch.randn(4, 3)
    torch.manual_seed(7)
    action = agent.explore_action(state)
    stds = agent.noise.stds.clone()
    assert stds.shape == (4, 1) and ((0.1 <= stds) & (stds <= 0.5)).all()
    assert len(set(stds.flatten().tolist())) == 4
    torch.manual_seed(7)
    noise = torch.randn(4, 1)  # the same draws, in the same order: the noise, then the stds
    torch.testing.assert_close(agent.noise.draw_stds((4,)), stds)
    with torch.no_grad():
        want = (agent.actor(state) + noise * stds).clamp(-1, 1)
    torch.testing.assert_close(action, want)
    kept = (state, action)
    ended = torch.tensor([False, True, False, False])
    agent.record(kept, torch.zeros(4), ended, torch.zeros(4, dtype=torch.bool),
                 {"final_state": state})  # fmt: skip
    assert torch.equal(agent.noise.stds[[0, 2, 3]], stds[[0, 2, 3]])
    assert agent.noise.stds[1] != stds[1] and 0.1 <= agent.noise.stds[1] <= 0.5
    agent.record(kept, torch.zeros(4), torch.zeros(4, dtype=torch.bool), ended,
                 {"final_state": state})  # a time limit ends an episode too  # fmt: skip
    assert agent.noise.stds[1] != stds[1]
    saved = agent.sub_env_state()
    fresh, _ = make_agent(AgentTD3, explore_noise_std=0.1, explore_noise_std_max=0.5)
    fresh.load_sub_env_state(saved)
    assert torch.equal(fresh.noise.stds, agent.noise.stds)


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"critic_atoms": 1}, "critic_atoms=1; critic_atoms must be 0"),
     ({"critic_atoms": 51}, "critic_v_min=None; critic_v_min must be a finite number"),
     ({**C51, "critic_v_max": -5.0}, "critic_v_max must be greater than critic_v_min"),
     ({"explore_noise_std": 0.2, "explore_noise_std_max": 0.1},
      "explore_noise_std_max must be a finite number >= explore_noise_std"),
     ({"explore_noise_std_max": 0.4, "h_term": True}, "remove explore_noise_std_max or h_term")],
)  # fmt: skip
def test_bad_critic_and_noise_settings_are_refused_naming_what_to_do(fields, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(Config(algo="td3", env_id="Pendulum-v1", **fields), batched=True)


def test_multi_agent_agents_refuse_the_single_agent_options(tmp_path):
    config = Config(algo="matd3", env_id="SpreadContinuous-v0", max_steps=100, **C51,
                    cwd=str(tmp_path / "run"))  # fmt: skip
    with pytest.raises(ConfigError, match="distributional critics, CrossQ's critics and per-sub"):
        train_agent(config, log=None)


def test_presets_the_task_one_first_then_the_algorithms():
    assert preset_path("fast_td3", "Pendulum-v1") == CONFIG_DIR / "parallel/fast_td3_pendulum.yaml"
    assert preset_path("fast_sac", "Pendulum-v1") == CONFIG_DIR / "parallel/fast_sac_pendulum.yaml"
    assert preset_path("fast_td3", "Hopper-v5") == CONFIG_DIR / "parallel/fast_td3.yaml"
    assert preset_path("fast_sac", "MountainCarContinuous-v0") == (
        CONFIG_DIR / "parallel/fast_sac.yaml")  # fmt: skip
    assert preset_path("td3", "Hopper-v5") is None  # not FastTD3's: TD3 keeps its own


def test_parallel_defaults_per_device():
    cpu = resolve_config(Config(algo="fast_td3", env_id="Pendulum-v1"), batched=True)
    assert (cpu.num_envs, cpu.horizon_len, cpu.batch_size) == (1024, 1, 256)
    assert cpu.replay_ratio * cpu.num_envs == 16  # gradient steps per parallel step
    gpu = resolve_config(Config(algo="fast_sac", env_id="Pendulum-v1"), batched=True,
                         device_type="cuda")  # fmt: skip
    assert (gpu.batch_size, gpu.replay_ratio * gpu.num_envs) == (32_768, 2)
    assert gpu.net_dims == [1024, 512, 256]


@pytest.mark.distributed
@pytest.mark.timeout(600)
@pytest.mark.parametrize("algo", ["fast_td3", "fast_sac"])
@pytest.mark.parametrize("runner", [(), ("--runner", "parallel", "--num-workers", "2"),
                                    ("--learners", "2")])  # fmt: skip
def test_trains_through_each_runner_from_its_preset(tmp_path, algo, runner, cli):
    summary = tmp_path / "summary.json"
    extra = ("--set", "critic_atoms=21", "--set", "critic_v_min=-1700", "--set",
             "critic_v_max=0") if algo == "fast_td3" else ()  # fmt: skip
    result = cli("train", algo, "Pendulum-v1", "--seed", "0", "--max-steps", "2048",
                 "--num-envs", "64", "--eval-every", "1024", "--target-return", "none",
                 "--set", "learning_starts=256", "--cwd", str(tmp_path / "run"),
                 "--summary-json", str(summary), *extra, *runner, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"parallel/{algo}_pendulum.yaml" in result.stdout
    done = json.loads(summary.read_text())
    assert done["total_steps"] >= 2048 and done["updates"] > 0
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "soft_update_tau: 0.1" in saved and "n_step: 3" in saved


def test_batch_renorm_matches_the_formula_in_each_mode():
    """Batch renormalisation written out: batch normalisation during the warm-up; then
    (x - mean_B) / std_B * r + d with r, d the clipped corrections towards the running
    statistics; in eval mode the running statistics alone; each member its own."""
    from xiaoyarl.core.off_policy_nets import EnsembleBatchRenorm

    torch.manual_seed(0)
    layer = EnsembleBatchRenorm(2, 3, warmup_steps=1)
    with torch.no_grad():
        layer.weight.uniform_(0.5, 2)
        layer.bias.uniform_(-1, 1)
    x = torch.randn(2, 64, 3) * 4 + 10
    eps = 1e-3

    def batch_normed(x):
        mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
        return mean, var, (x - mean) / (var + eps).sqrt()

    mean, var, normed = batch_normed(x)
    torch.testing.assert_close(layer(x), normed * layer.weight + layer.bias)  # warm-up
    torch.testing.assert_close(layer.running_mean, 0.01 * mean)  # from 0, momentum 0.01
    torch.testing.assert_close(layer.running_var, 0.99 + 0.01 * var)
    run_mean, run_std = layer.running_mean.clone(), (layer.running_var + eps).sqrt()
    mean, var, normed = batch_normed(x)
    r = ((var + eps).sqrt() / run_std).clamp(1 / 3, 3)
    d = ((mean - run_mean) / run_std).clamp(-5, 5)
    assert (r == 3).any() and (d == 5).any()  # the clipping is exercised
    torch.testing.assert_close(layer(x), (normed * r + d) * layer.weight + layer.bias)
    layer.eval()
    stats = (layer.running_mean.clone(), layer.running_var.clone())
    want = (x - stats[0]) / (stats[1] + eps).sqrt() * layer.weight + layer.bias
    torch.testing.assert_close(layer(x), want)
    assert torch.equal(layer.running_mean, stats[0]) and int(layer.steps) == 2


@pytest.mark.parametrize("cls", [AgentTD3, AgentSAC])
def test_crossq_critic_loss_is_one_pass_over_both_batches_with_no_target_networks(cls):
    """CrossQ's critic loss the obvious way: the critics (in training mode, so their batch
    renormalisation sees both) on (s, a) and (s', a') concatenated; the target from the second
    half, min over critics (minus SAC's entropy term), without gradient."""
    import copy

    agent, _ = make_agent(cls, crossq=True, policy_noise_std=0.0)
    assert "critic_target" not in agent.nets and agent.actor_target is None
    assert agent.critic_target is agent.critic
    batch = batch_for(agent)
    before = copy.deepcopy(agent.critic)
    torch.manual_seed(3)
    loss, q, _ = agent.critic_loss(batch)
    torch.manual_seed(3)
    with torch.no_grad():
        if cls is AgentSAC:
            action, logprob = agent.actor.get_action_logprob(batch.next_states)
            penalty = agent.temperature() * logprob
        else:
            action, penalty = agent.actor(batch.next_states), torch.zeros(6)
    both = before(torch.cat([batch.states, batch.next_states]), torch.cat([batch.actions, action]))
    now, nxt = both[:, :6], both[:, 6:].detach()
    keep = batch.discounts * (~batch.terminals).float()
    target = batch.rewards + keep * (nxt.min(0).values - penalty)
    want = sum((batch.weights * (now[c] - target) ** 2).mean() for c in range(2))
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(q, now)
    stats = [b.clone() for b in agent.critic.buffers()]
    agent.update_actor(batch)  # the actor reads the critics in eval mode
    assert all(torch.equal(a, b) for a, b in zip(stats, agent.critic.buffers(), strict=True))
    assert agent.critic.training


def test_crossq_refuses_distributional_critics():
    with pytest.raises(ConfigError, match="crossq must be false with critic_atoms"):
        resolve_config(Config(algo="sac", env_id="Pendulum-v1", crossq=True, **C51), batched=True)


def fast_agent(algo: str, preset: bool = True, **fields):
    """A FastTD3 / FastSAC agent on Pendulum with its recipe preset (the repository's settings)
    unless `preset` is False, small sizes, and `fields`."""
    from xiaoyarl.config_io import load_config

    config = load_config(CONFIG_DIR / f"parallel/{algo}.yaml") if preset else Config()
    config.algo, config.env_id = algo, "Pendulum-v1"
    for name, value in {"num_envs": 4, "batch_size": 32, "net_dims": [32, 32], **fields}.items():
        setattr(config, name, value)
    config = resolve_config(config, batched=True)
    env = make_env("Pendulum-v1", 4, seed=0)
    return agent_class(algo, env.spec)(env.spec, config, torch.device("cpu"))


def test_fast_td3_follows_its_reference_update(batch_for):
    """As the FastTD3 repository's train.py: no target actor (the online actor gives the target's
    actions), the target critics soft-updated after every critic step (TD3 moves them with the
    delayed actor step only), the actor ascending min(Q1, Q2), AdamW with weight decay 0.1, and
    a C51 critic of 101 atoms, all from the recipe preset."""
    agent = fast_agent("fast_td3")
    assert agent.actor_target is None and "actor_target" not in agent.nets
    assert agent.config.critic_atoms == 101
    assert isinstance(agent.critic, DistributionalCriticEnsemble)
    for name in ("actor", "critic"):
        group = agent.optimizers[name].param_groups[0]
        assert group["weight_decay"] == 0.1 and group["decoupled_weight_decay"], name
    for step in range(2):  # an actor step on one of every policy_delay (2) critic steps
        actor_before = [p.clone() for p in agent.actor.parameters()]
        target_before = [p.clone() for p in agent.critic_target.parameters()]
        agent.update_step(batch_for(agent, size=32))
        agent.updates += 1
        moved = [
            not torch.equal(a, b)
            for a, b in zip(actor_before, agent.actor.parameters(), strict=True)
        ]
        assert any(moved) == (step == 0), step  # TD3's phase: the actor on the first of two
        target = [
            not torch.equal(a, b)
            for a, b in zip(target_before, agent.critic_target.parameters(), strict=True)
        ]
        assert all(target), step  # every critic step moves the target critics
    # the actor's loss is the smaller critic's value: against a reference on the same weights
    batch = batch_for(agent, size=64)
    q = agent.critic_q_for_actor(batch.states, agent.actor(batch.states))  # (2, B)
    logs = agent.update_actor(batch)
    torch.testing.assert_close(logs["actor_loss"], -q.min(0).values.mean().detach())


def test_fast_sac_follows_its_reference_update(batch_for):
    """As the repository's fast_sac/train.py: the temperature starts at 0.001 and steps, with
    the actor, on every second critic step, with plain Adam (no weight decay); actor and
    critics step with AdamW, weight decay 0.1."""
    agent = fast_agent("fast_sac")
    assert agent.temperature().item() == pytest.approx(0.001)
    assert agent.optimizers["temperature"].param_groups[0]["weight_decay"] == 0
    assert agent.optimizers["critic"].param_groups[0]["weight_decay"] == 0.1
    alphas = []
    for step in range(4):
        actor_before = [p.clone() for p in agent.actor.parameters()]
        logs, _ = agent.update_step(batch_for(agent, size=32))
        agent.updates += 1
        moved = any(
            not torch.equal(a, b)
            for a, b in zip(actor_before, agent.actor.parameters(), strict=True)
        )
        assert moved == (step % 2 == 0), step
        assert ("alpha" in logs) == moved
        alphas.append(agent.temperature().item())
    assert alphas[0] != pytest.approx(0.001) and alphas[1] == alphas[0]  # stepped, then held
    assert agent.update_cycle() == 2


def test_without_the_preset_fast_agents_are_their_base_algorithms_in_optimizer_and_critic():
    """--no-preset keeps the library's TD3 and SAC values: Adam, no C51, alpha 1."""
    td3 = fast_agent("fast_td3", preset=False)
    assert td3.optimizers["actor"].param_groups[0]["weight_decay"] == 0
    assert not td3.config.critic_atoms
    assert fast_agent("fast_sac", preset=False).temperature().item() == pytest.approx(1.0)
