"""Model fusion of per-run state: normalisers pool the runs' data (mean and variance of the
pooled samples, not the average of the variances), and what belongs to each run's own sub-envs
(PPO reward scaling's running returns) is the first run's, whose env the fused run continues."""

from __future__ import annotations

import pytest
import torch

from xiaoyarl import Config
from xiaoyarl.agents import agent_class
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.envs import make_env
from xiaoyarl.scale.fusion import fuse_agent_states

N = 4  # sub-envs


def ppo_agent(seed: int):
    """A PPO agent on Pendulum with an observation normaliser and reward scaling."""
    config = Config(algo="ppo", env_id="Pendulum-v1", num_envs=N, horizon_len=8, batch_size=8,
                    net_dims=[8, 8], state_norm=True, reward_norm=True)  # fmt: skip
    config = resolve_config(config, batched=True)
    spec = make_env("Pendulum-v1", N).spec
    torch.manual_seed(seed)
    return agent_class("ppo", spec)(spec, config, torch.device("cpu"))


def set_statistics(norm, samples: torch.Tensor) -> None:
    """The normaliser's statistics of `samples (n, dim)`, exactly (population variance)."""
    norm.mean.copy_(samples.mean(0))
    norm.var.copy_(samples.var(0, unbiased=False))
    norm.count.fill_(samples.shape[0])


def samples(n: int, dim: int, scale: float, shift: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g, dtype=torch.float64) * scale + shift


@pytest.mark.parametrize("weights", [[1.0, 1.0], [1.0, 3.0]])
def test_fused_normalisers_hold_the_statistics_of_the_pooled_data(weights):
    """Weight w on a run counts its samples w times: [1, 3] pools a's data with b's thrice."""
    a, b = ppo_agent(0), ppo_agent(1)
    dim = a.spec.state_dim
    states = [samples(100, dim, 2.0, 3.0, 0), samples(300, dim, 0.5, -1.0, 1)]
    returns = [samples(50, 1, 1.0, -5.0, 2), samples(70, 1, 3.0, 4.0, 3)]
    for agent, s, r in zip((a, b), states, returns, strict=True):
        set_statistics(agent.state_norm, s)
        set_statistics(agent.reward_scaler.stats, r)
    fused = fuse_agent_states([a.state_dict(), b.state_dict()], weights)["nets"]
    repeat = [int(w) for w in weights]

    def pooled(parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat([p for p, k in zip(parts, repeat, strict=True) for _ in range(k)])

    for net, prefix, parts in [("actor", "norm.", states), ("critic", "norm.", states),
                               ("reward", "stats.", returns)]:  # fmt: skip
        data = pooled(parts)
        got = {k: fused[net][prefix + k] for k in ("mean", "var", "count")}
        torch.testing.assert_close(got["mean"].double(), data.mean(0), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got["var"].double(), data.var(0, unbiased=False), rtol=1e-5,
                                   atol=1e-6)  # fmt: skip
        counts = [len(p) for p in parts]  # the count of one run's worth of data, on average
        assert got["count"].item() == pytest.approx(
            sum(w * n for w, n in zip(weights, counts, strict=True)) / sum(weights)
        )


def test_fused_ppo_keeps_the_first_runs_running_returns():
    a, b = ppo_agent(0), ppo_agent(1)
    a.reward_scaler.returns.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    b.reward_scaler.returns.copy_(torch.tensor([10.0, 20.0, 30.0, 40.0]))
    fused = fuse_agent_states([a.state_dict(), b.state_dict()])
    assert torch.equal(fused["nets"]["reward"]["returns"], a.reward_scaler.returns)
    weight = fused["nets"]["actor"]["net.0.weight"]  # networks are still averaged
    mean = (a.actor.net[0].weight + b.actor.net[0].weight) / 2
    torch.testing.assert_close(weight, mean.detach())


def test_fusing_copies_of_a_ppo_agent_gives_its_normalisers_back_exactly():
    agent = ppo_agent(0)
    states = samples(64, agent.spec.state_dim, 2.0, 3.0, 0)
    states[:, 0] = 7.0  # a constant feature: variance 0 stays 0
    set_statistics(agent.state_norm, states)
    set_statistics(agent.reward_scaler.stats, samples(64, 1, 1.0, -5.0, 2))
    agent.reward_scaler.returns.normal_()
    state = agent.state_dict()
    fused = fuse_agent_states([state, state, state], weights=[0.2, 0.3, 0.5])
    for name, net_state in state["nets"].items():
        for key, value in net_state.items():
            assert torch.equal(fused["nets"][name][key], value), f"{name}.{key}"
